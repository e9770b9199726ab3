"""`python -m podgrouper`: the same command as `podgrouper`."""
from podgrouper.cli import main

main()
