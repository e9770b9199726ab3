"""Unit tests: pure model, framework, plugins and one scheduler cycle at a time."""
