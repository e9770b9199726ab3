"""kaisched: a gang-aware batch scheduler for Kubernetes."""
__version__ = "0.1.0"
