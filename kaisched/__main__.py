"""`python -m kaisched`: the same command as `kaisched`."""
from kaisched.cli import main

main()
