"""``python -m bench.gpu_extra`` (``make bench-gpu-extra``): does ``pip install -e '.[gpu]'`` resolve with
the project's pins on a CUDA Linux machine?

pip's own resolver runs on pyproject's dependencies plus the ``gpu`` extra for a manylinux x86_64
CPython (``--dry-run --report``: metadata only, nothing installed, no CUDA wheel downloaded;
``--isolated``, so this machine's CPU torch wheel and constraints stay out of it). It prints each pin
beside what resolved, the CUDA libraries torch pulled in, and whether vLLM lies in the range the
resolved TRL supports; exit 1 when anything disagrees. Needs the package index. Pins published only
as source are listed, not resolved (pip resolves another platform from wheels only): deepspeed
(built by ``make setup``) and flash-attn (``make gpu-setup``, built against the installed torch);
for flash-attn it checks that the Makefile's pin is on the index.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

from leanloop.paths import REPO_ROOT
from leanloop.tool import cli_entry, parse_config

SOURCE_ONLY = {"deepspeed": "no wheel on the index; `make setup` builds it (DS_BUILD_OPS=0)"}


@dataclass
class GpuExtraConfig:
    python_version: str = "3.11"
    """The CUDA machine's CPython (the project needs >= 3.11)."""
    glibc: str = "2.35"
    """The machine's glibc: wheels tagged manylinux_2_5 ... manylinux_<glibc> are accepted (2.35: Ubuntu 22.04)."""
    extra: str = "gpu"
    timeout_s: float = 600.0
    json: str | None = None
    """Also write the comparison here."""


def requirements(extra: str) -> list[Requirement]:
    project = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]
    return [Requirement(r) for r in project["dependencies"] + project["optional-dependencies"][extra]]


def makefile_pin(name: str) -> str:
    """A pin set in the Makefile (``FLASH_ATTN ?= 2.8.3``)."""
    found = re.search(rf"^{name}\s*\?=\s*(\S+)", (REPO_ROOT / "Makefile").read_text(), re.M)
    if found is None:
        raise ValueError(f"the Makefile sets no {name}")
    return found.group(1)


def platforms(glibc: str) -> list[str]:
    major, minor = (int(x) for x in glibc.split("."))
    return [f"manylinux_{major}_{m}_x86_64" for m in range(minor, 4, -1)] + [
        "manylinux2014_x86_64",
        "manylinux2010_x86_64",
        "manylinux1_x86_64",
        "linux_x86_64",
    ]


def resolve(reqs: list[Requirement], config: GpuExtraConfig, scratch: Path) -> dict[str, Any]:
    """pip's report for ``reqs`` on the target platform (raises with pip's error when it cannot)."""
    report = scratch / "report.json"
    command = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--isolated",
        "--dry-run",
        "--quiet",
        "--report",
        str(report),
        "--ignore-installed",
        "--only-binary",
        ":all:",
        "--python-version",
        config.python_version,
        "--implementation",
        "cp",
        "--target",
        str(scratch / "target"),
        *[arg for tag in platforms(config.glibc) for arg in ("--platform", tag)],
        *map(str, reqs),
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=config.timeout_s)
    if done.returncode:
        errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")] or done.stderr.splitlines()[
            -3:
        ]
        raise RuntimeError("pip could not resolve the extra: " + " | ".join(errors))
    return json.loads(report.read_text())


def on_index(name: str, version: str) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", name, "--isolated"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    listed = re.search(r"Available versions: (.*)", done.stdout)
    return bool(listed) and version in [v.strip() for v in listed.group(1).split(",")]


def compare(reqs: list[Requirement], report: dict[str, Any]) -> dict[str, Any]:
    """Each pin beside what resolved, the CUDA libraries, and TRL's vLLM range against the vLLM resolved."""
    resolved = {canonicalize_name(item["metadata"]["name"]): item["metadata"] for item in report["install"]}
    rows = []
    for req in reqs:
        name = canonicalize_name(req.name)
        got = resolved.get(name, {}).get("version")
        rows.append(
            {
                "name": name,
                "pin": str(req.specifier) or "(any)",
                "resolved": got,
                "ok": got is not None and req.specifier.contains(got, prereleases=True),
            }
        )
    trl_range = next(
        (
            Requirement(r).specifier
            for r in resolved.get("trl", {}).get("requires_dist", [])
            if canonicalize_name(Requirement(r).name) == "vllm"
        ),
        None,
    )
    vllm = resolved.get("vllm", {}).get("version")
    return {
        "rows": rows,
        "cuda_libraries": sorted(n for n in resolved if n.startswith("nvidia-")),
        "trl_vllm_range": str(trl_range) if trl_range is not None else None,
        "vllm": vllm,
        "vllm_in_trl_range": bool(trl_range is not None and vllm and trl_range.contains(Version(vllm))),
        "packages": len(resolved),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    config, _ = parse_config(
        GpuExtraConfig, argv, prog="python -m bench.gpu_extra", description=__doc__.split("\n\n")[0]
    )
    reqs = requirements(config.extra)
    wheels = [r for r in reqs if canonicalize_name(r.name) not in SOURCE_ONLY]
    began = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-extra-") as scratch:
        result = compare(wheels, resolve(wheels, config, Path(scratch)))
    flash = makefile_pin("FLASH_ATTN")
    result.update(
        seconds=round(time.perf_counter() - began, 1),
        python=config.python_version,
        glibc=config.glibc,
        source_only={
            **SOURCE_ONLY,
            f"flash-attn=={flash}": "`make gpu-setup` builds it against the installed torch (--no-build-isolation)",
        },
        flash_attn_on_index=on_index("flash-attn", flash),
    )
    print(
        f"[bench-gpu-extra] CPython {config.python_version}, manylinux up to glibc {config.glibc}: "
        f"{result['packages']} packages resolved in {result['seconds']}s (nothing installed)"
    )
    print(f"  {'package':<26} {'pinned':<22} {'resolved':<14}")
    for row in result["rows"]:
        print(f"  {row['name']:<26} {row['pin']:<22} {row['resolved'] or '-':<14} {'' if row['ok'] else 'MISMATCH'}")
    for name, why in result["source_only"].items():
        print(f"  {name:<26} source only: {why}")
    print(
        f"  CUDA libraries pulled in by torch/vLLM: {len(result['cuda_libraries'])} "
        f"({', '.join(result['cuda_libraries'][:4])}, ...)"
    )
    print(
        f"  vLLM {result['vllm']} in TRL's supported range {result['trl_vllm_range']}: {result['vllm_in_trl_range']}; "
        f"flash-attn {flash} on the index: {result['flash_attn_on_index']}"
    )
    result["ok"] = (
        all(r["ok"] for r in result["rows"])
        and result["vllm_in_trl_range"]
        and result["flash_attn_on_index"]
        and bool(result["cuda_libraries"])
    )
    print(f"[bench-gpu-extra] {'the gpu extra resolves with the pins' if result['ok'] else 'FAILED: see above'}")
    if config.json:
        Path(config.json).write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    raise SystemExit(cli_entry(lambda: 0 if main()["ok"] else 1, prog="python -m bench.gpu_extra"))
