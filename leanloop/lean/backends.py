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

BackendOptions = Union[LocalBackendConfig, KiminaBackendConfig, ReplayBackendConfig]
BACKEND_CONFIGS: dict[str, type] = {
    "local": LocalBackendConfig,
    "kimina": KiminaBackendConfig,
    "replay": ReplayBackendConfig,
}


def backend_from_config(config: BackendOptions) -> LeanBackend:
    """The backend one kind's options dataclass describes."""
    if isinstance(config, LocalBackendConfig):
        return LocalBackend(config)
    if isinstance(config, KiminaBackendConfig):
        return KiminaBackend(config)
    if isinstance(config, ReplayBackendConfig):
        return ReplayBackend(config.sources, honor_timeout=config.honor_timeout)
    raise TypeError(
        f"not a backend config: {type(config).__name__}; expected one of "
        + ", ".join(c.__name__ for c in BACKEND_CONFIGS.values())
    )


@dataclass
class BackendConfig:
    """The config section choosing the Lean backend, the same in every stage, with every kind's
    typed options at hand (only the chosen kind's are used)::

        backend:
          kind: kimina
          kimina: {url: "http://lean-server:12332", timeout: 60}
    """

    kind: Literal["local", "kimina", "replay"] = "replay"
    """``replay`` (recorded real Lean output), ``local`` (lean-interact) or ``kimina`` (server)."""
    local: LocalBackendConfig = field(default_factory=LocalBackendConfig)
    kimina: KiminaBackendConfig = field(default_factory=KiminaBackendConfig)
    replay: ReplayBackendConfig = field(default_factory=ReplayBackendConfig)

    @property
    def options(self) -> BackendOptions:
        """The chosen kind's options."""
        return getattr(self, self.kind)

    def build(self) -> LeanBackend:
        return backend_from_config(self.options)


def make_backend(config: BackendConfig | BackendOptions | str, **options: Any) -> LeanBackend:
    """The one backend factory. ``make_backend(section)`` for a config's ``backend:`` section,
    ``make_backend(LocalBackendConfig(...))`` for one kind's options, or by name with keyword
    options: ``make_backend("local", workers=8, timeout=60)``, ``make_backend("kimina",
    url="http://lean:12332")``. Creating one starts nothing."""
    if isinstance(config, BackendConfig):
        if options:
            raise TypeError("give either a BackendConfig or keyword options, not both")
        return config.build()
    if not isinstance(config, str):
        if options:
            raise TypeError(f"give either a {type(config).__name__} or keyword options, not both")
        return backend_from_config(config)
    kind = config
    if kind not in BACKEND_CONFIGS:
        raise ValueError(f"unknown Lean backend {kind!r}; choose one of {', '.join(BACKEND_CONFIGS)}")
    config_type = BACKEND_CONFIGS[kind]
    known = {f.name for f in fields(config_type)}
    unknown = sorted(set(options) - known)
    if unknown:
        raise ValueError(
            f"unknown option(s) {unknown} for the {kind!r} backend; "
            f"{config_type.__name__} has: {', '.join(sorted(known))}"
        )
    return backend_from_config(config_type(**options))


__all__ = [
    "BACKEND_CONFIGS",
    "BackendConfig",
    "BackendOptions",
    "backend_from_config",
    "make_backend",
    "KiminaBackendConfig",
    "LocalBackendConfig",
    "ReplayBackendConfig",
]
