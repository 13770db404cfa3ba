"""Choose a Lean backend by name, so configs can say ``backend: local | kimina | replay``.

Each kind's options are a typed dataclass (usable by jsonargparse): ``LocalBackendConfig``
(lean-interact pool), ``KiminaBackendConfig`` (Kimina Lean Server client), ``ReplayBackendConfig``
(recorded answers). README "Lean backends" documents them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any, Literal, Union

from leanloop.lean.kimina import KiminaBackend, KiminaBackendConfig
from leanloop.lean.local import LocalBackend, LocalBackendConfig
from leanloop.lean.replay import ReplayBackend, ReplayBackendConfig
from leanloop.lean.types import LeanBackend

BackendConfig = Union[LocalBackendConfig, KiminaBackendConfig, ReplayBackendConfig]
BACKEND_CONFIGS: dict[str, type] = {
    "local": LocalBackendConfig,
    "kimina": KiminaBackendConfig,
    "replay": ReplayBackendConfig,
}


def backend_from_config(config: BackendConfig) -> LeanBackend:
    """The backend an options dataclass describes (e.g. one jsonargparse built from a YAML file)."""
    if isinstance(config, LocalBackendConfig):
        return LocalBackend(config)
    if isinstance(config, KiminaBackendConfig):
        return KiminaBackend(config)
    if isinstance(config, ReplayBackendConfig):
        return ReplayBackend(config.sources, honor_timeout=config.honor_timeout)
    raise TypeError(f"not a backend config: {type(config).__name__}; expected one of "
                    + ", ".join(c.__name__ for c in BACKEND_CONFIGS.values()))


@dataclass
class BackendSettings:
    """A config section choosing the backend, with every kind's options at hand::

        backend:
          kind: kimina
          kimina: {url: "http://lean-server:12332", timeout: 60}
    """

    kind: Literal["local", "kimina", "replay"] = "replay"
    local: LocalBackendConfig = field(default_factory=LocalBackendConfig)
    kimina: KiminaBackendConfig = field(default_factory=KiminaBackendConfig)
    replay: ReplayBackendConfig = field(default_factory=ReplayBackendConfig)

    def build(self) -> LeanBackend:
        return backend_from_config(getattr(self, self.kind))


def make_backend(kind: str, **options: Any) -> LeanBackend:
    """``make_backend("replay")``, ``make_backend("local", workers=8, timeout=60)``,
    ``make_backend("kimina", url="http://lean:12332")``. Creating one starts nothing."""
    if kind not in BACKEND_CONFIGS:
        raise ValueError(f"unknown Lean backend {kind!r}; choose one of {', '.join(BACKEND_CONFIGS)}")
    config_type = BACKEND_CONFIGS[kind]
    known = {f.name for f in fields(config_type)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(f"unknown option(s) {unknown} for the {kind!r} backend; "
                         f"{config_type.__name__} has: {', '.join(sorted(known))}")
    return backend_from_config(config_type(**options))


__all__ = ["BACKEND_CONFIGS", "BackendConfig", "BackendSettings", "backend_from_config", "make_backend",
           "KiminaBackendConfig", "LocalBackendConfig", "ReplayBackendConfig"]
