"""The built-in actions and plugins, registered in one call: the one place that
names them all, so the loop is handed a registry and names none."""
