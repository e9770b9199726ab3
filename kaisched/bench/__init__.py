"""`kaisched bench`: the performance scenarios and the API emulator they use."""
