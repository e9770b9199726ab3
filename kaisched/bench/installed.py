"""A kaisched process timed as an installed one starts: its modules read as
bytecode, compiled once.

pip compiles a package's modules when it installs them, so an installed
scheduler starts by reading bytecode. A source tree run with
PYTHONDONTWRITEBYTECODE set (as on the machine these figures come from)
compiles every module again at each start: 0.15 s of the 0.55 s `kaisched
run` spends importing, which no installed scheduler spends. The benches that
time a start give the process a bytecode cache of its own, filled before
the clock starts."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# What `kaisched run` imports before its first list: the command line, the
# client, the loop and the plugins.
RUN_MODULES = ("kaisched.cli.production", "kaisched.cluster.kube", "kaisched.runtime.scheduler",
               "kaisched.runtime.metrics", "kaisched.service.health", "kaisched.builtins.catalog",
               "kaisched.cli.inputs", "kaisched.runtime.binder")


def installed_env(cache: Path) -> dict[str, str]:
    """The environment of a process that reads kaisched's modules (and
    every other) compiled, from cache (a folder), filled here first."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(cache)
    subprocess.run([sys.executable, "-c", f"import {', '.join(RUN_MODULES)}"], env=env,
                   check=True)
    return env
