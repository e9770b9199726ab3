"""Unit tests, laid out as the source is: the tests of kaisched/api/gpudevices.py are in
tests/unit/kaisched/api/test_gpudevices.py (or test_gpudevices_<aspect>.py). Property tests
over the whole scheduler are in properties/; the checks of the architecture itself
(test_layers.py and the like) read the whole source and sit here."""
