"""The scheduling framework: session, statement, hooks, config, registry."""
from kaisched.framework.config import SchedulerConfig, default_config, load_config, parse_config
from kaisched.framework.hooks import Hook, HookRegistry
from kaisched.framework.registry import Action, PluginBase, Registry
from kaisched.framework.selection import Choice
from kaisched.framework.session import Plugin, Session
from kaisched.framework.statement import Statement

__all__ = ["Action", "Choice", "Hook", "HookRegistry", "Plugin", "PluginBase", "Registry",
           "SchedulerConfig", "Session", "Statement", "default_config", "load_config",
           "parse_config"]
