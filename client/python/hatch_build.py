"""Build hook: the gRPC stubs are generated from the protos when the package is built.

- sdist: the repository's ``proto/baton/v1/*.proto`` (``../../proto`` from here) is copied
  into the sdist as ``proto/``, so a wheel can be built from the sdist alone.
- wheel: ``grpc_tools.protoc`` (pinned in pyproject.toml's build requirements) generates
  ``baton_client/_proto/baton/v1/*_pb2.py``, ``*_pb2.pyi`` and ``*_pb2_grpc.py`` from
  ``proto/`` (the sdist's copy) or else ``../../proto`` (a repository checkout), with the
  generated ``from baton.v1 import ...`` rewritten to
  ``from baton_client._proto.baton.v1 import ...`` (and the classes' module names to
  match, so they pickle). A regular wheel gets them in a
  temporary directory (the source tree is left alone); an editable install writes them
  into ``src/baton_client/_proto/baton`` (ignored by git).

The wheel's ``protobuf`` and ``grpcio`` requirements are raised to what the generated code
itself checks at import (``ValidateProtobufRuntimeVersion`` and ``GRPC_GENERATED_VERSION``,
present from protoc 26 / grpcio-tools 1.63 on), so a build with a newer grpcio-tools (a
newer Python) never yields a wheel that installs but fails to import.
"""

from __future__ import annotations

import re
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

PACKAGE = "baton_client"
GENERATED_PACKAGE = f"{PACKAGE}._proto"
_IMPORT = re.compile(r"^(\s*)from baton\.v1 import ", re.MULTILINE)
# The module name the message classes are built under (their __module__, used by pickle).
_MODULE_NAME = re.compile(r"(BuildTopDescriptorsAndMessages\(\s*DESCRIPTOR,\s*['\"])baton\.v1\.")
_PROTOBUF_VERSION = re.compile(r"^# Protobuf Python Version: (\d+\.\d+\.\d+)", re.MULTILINE)
_RUNTIME_CHECK = re.compile(
    r"ValidateProtobufRuntimeVersion\(\s*_runtime_version\.Domain\.PUBLIC,\s*(\d+),\s*(\d+),\s*(\d+),"
)
_GRPC_GENERATED = re.compile(r"^GRPC_GENERATED_VERSION = '([0-9.]+)'", re.MULTILINE)


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        if self.target_name == "sdist":
            source = self._proto_root(root)
            for proto in sorted((source / "baton" / "v1").glob("*.proto")):
                build_data["force_include"][str(proto)] = f"proto/baton/v1/{proto.name}"
            return
        if self.target_name != "wheel":
            return

        if version == "editable":
            out = root / "src" / PACKAGE / "_proto"
            shutil.rmtree(out / "baton", ignore_errors=True)
            self._generate(root, out)
            return

        self._tmp = tempfile.mkdtemp(prefix="baton-client-stubs-")
        out = Path(self._tmp)
        generated = self._generate(root, out)
        for path in generated:
            relative = path.relative_to(out).as_posix()
            build_data["force_include"][str(path)] = f"{PACKAGE}/_proto/{relative}"
        build_data["dependencies"].extend(self._floors(generated))

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        tmp = getattr(self, "_tmp", None)
        if tmp:
            shutil.rmtree(tmp, ignore_errors=True)

    @staticmethod
    def _proto_root(root: Path) -> Path:
        for candidate in (root / "proto", root.parent.parent / "proto"):
            if (candidate / "baton" / "v1").is_dir():
                return candidate
        raise RuntimeError(
            f"baton-client: no proto/baton/v1 found in {root} (an sdist's copy) nor in "
            f"{root.parent.parent} (the Baton repository); build from the repository's "
            "client/python or from the sdist"
        )

    def _generate(self, root: Path, out: Path) -> list[Path]:
        try:
            import grpc_tools
            from grpc_tools import protoc
        except ImportError as e:  # pragma: no cover - the build requirements bring it
            raise RuntimeError("baton-client: building needs grpcio-tools (see pyproject.toml)") from e

        source = self._proto_root(root)
        protos = sorted((source / "baton" / "v1").glob("*.proto"))
        if not protos:
            raise RuntimeError(f"baton-client: no .proto files in {source / 'baton' / 'v1'}")
        well_known = Path(grpc_tools.__file__).parent / "_proto"
        out.mkdir(parents=True, exist_ok=True)
        args = [
            "grpc_tools.protoc",
            f"-I{source}",
            f"-I{well_known}",
            f"--python_out={out}",
            f"--pyi_out={out}",
            f"--grpc_python_out={out}",
            *(str(p.relative_to(source)) for p in protos),
        ]
        code = protoc.main(args)
        if code != 0:
            raise RuntimeError(f"baton-client: protoc failed ({code}): {' '.join(args)}")

        generated: list[Path] = []
        v1 = out / "baton" / "v1"
        for init in (out / "baton" / "__init__.py", v1 / "__init__.py"):
            init.write_text('"""Generated by hatch_build.py from proto/baton/v1 (do not edit)."""\n')
            generated.append(init)
        for path in sorted(v1.iterdir()):
            if path.suffix not in (".py", ".pyi") or path.name == "__init__.py":
                continue
            text = path.read_text(encoding="utf-8")
            text = _IMPORT.sub(rf"\1from {GENERATED_PACKAGE}.baton.v1 import ", text)
            text = _MODULE_NAME.sub(rf"\1{GENERATED_PACKAGE}.baton.v1.", text)
            path.write_text(text, encoding="utf-8")
            generated.append(path)
        self.app.display_info(
            f"baton-client: generated {len(protos)} protos with {protoc.__name__} "
            f"({_protoc_version()}) on Python {sys.version.split()[0]}"
        )
        return generated

    @staticmethod
    def _floors(generated: list[Path]) -> list[str]:
        """The runtime versions the generated code checks for when it is imported."""
        protobuf: tuple[int, ...] | None = None
        grpcio: tuple[int, ...] | None = None
        for path in generated:
            text = path.read_text(encoding="utf-8")
            for m in _RUNTIME_CHECK.finditer(text):
                protobuf = max(protobuf or (0,), tuple(int(x) for x in m.groups()))
            for m in _GRPC_GENERATED.finditer(text):
                grpcio = max(grpcio or (0,), tuple(int(x) for x in m.group(1).split(".")))
        floors = []
        if protobuf:
            floors.append("protobuf>=" + ".".join(map(str, protobuf)))
        if grpcio:
            floors.append("grpcio>=" + ".".join(map(str, grpcio)))
        return floors


def _protoc_version() -> str:
    try:
        from importlib.metadata import version

        return f"grpcio-tools {version('grpcio-tools')}"
    except Exception:  # pragma: no cover
        return "grpcio-tools ?"

