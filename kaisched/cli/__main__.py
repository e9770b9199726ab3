"""python -m kaisched.cli, for a checkout not installed."""
from kaisched.cli import main

main()
