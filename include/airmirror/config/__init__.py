"""MM2-compatible configuration: properties parsing, config providers, flows and client settings."""

from airmirror.config.mirror_config import FlowConfig, MirrorConfig, load_config
from airmirror.config.properties import Setting
from airmirror.mm2.policy import PatternList, RegexFilter

__all__ = ["FlowConfig", "MirrorConfig", "PatternList", "RegexFilter", "Setting", "load_config"]
