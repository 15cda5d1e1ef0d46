"""`make wheel-check`: the built wheel, as a new user gets it.

Run by the interpreter of a bare virtual environment into which only the wheel was pip-installed
(pip fetched its declared dependencies), from a directory outside the source tree:

    python tests/wheel_check.py WHEEL --manylinux manylinux_2_28

Checks that the package imports with its declared dependencies alone, replays, that the command line
answers and names the ``lab`` extra when a command needs it, and that the wheel is tagged for the
glibc it links against and carries no debug info. Exits non-zero on the first failed check.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import re
import shutil
import struct
import subprocess
import sys
import sysconfig
import time
import zipfile
from pathlib import Path

LAB = ("pyspark", "pandas", "matplotlib", "markdown")


def check(ok: bool, what: str) -> None:
    print(f"  {'ok  ' if ok else 'FAIL'} {what}", flush=True)
    if not ok:
        sys.exit(1)


def elf_sections(data: bytes) -> list[str]:
    """Section names of a 64-bit little-endian ELF file."""
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1, "not a 64-bit little-endian ELF file"
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab_off, strtab_size = headers[shstrndx][4], headers[shstrndx][5]
    strtab = data[strtab_off : strtab_off + strtab_size]
    return [strtab[h[0] : strtab.index(b"\0", h[0])].decode() for h in headers]


def glibc_versions(data: bytes) -> list[tuple[int, ...]]:
    found = {tuple(int(p) for p in m.group(1).split(b".")) for m in re.finditer(rb"GLIBC_(\d+\.\d+(?:\.\d+)?)\0", data)}
    return sorted(found)


def run(*argv: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(list(argv), capture_output=True, text=True, cwd=cwd, timeout=300)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("wheel", type=Path)
    p.add_argument("--manylinux", required=True, help="the tag the wheel must carry, e.g. manylinux_2_28")
    args = p.parse_args()
    bindir = Path(sys.executable).parent
    site = Path(sysconfig.get_paths()["purelib"]).resolve()

    print(f"== the wheel: {args.wheel.name}")
    check(f"-{args.manylinux}_" in args.wheel.name, f"tagged {args.manylinux}")
    with zipfile.ZipFile(args.wheel) as z:
        ext = [i for i in z.infolist() if re.fullmatch(r"ledgercache/_native\..*\.so", i.filename)]
        check(len(ext) == 1, f"one extension module ({[i.filename for i in ext]})")
        data = z.read(ext[0])
    sections = elf_sections(data)
    debug = [s for s in sections if s.startswith((".debug", ".zdebug"))]
    check(not debug, f"no debug info (debug sections: {debug or 'none'})")
    want = tuple(int(x) for x in re.fullmatch(r"manylinux_(\d+)_(\d+)", args.manylinux).groups())
    newest = glibc_versions(data)[-1]
    check(newest <= want, f"newest glibc symbol version GLIBC_{'.'.join(map(str, newest))} <= {want[0]}.{want[1]}")
    print(f"  size: wheel {args.wheel.stat().st_size / 1e6:.2f} MB, extension {len(data) / 1e6:.2f} MB")

    print(f"== installed into a bare virtual environment ({sys.prefix})")
    installed = sorted(d.metadata["Name"].lower() for d in importlib.metadata.distributions())
    print(f"  distributions: {', '.join(installed)}")
    check(not set(LAB) & set(installed), "no lab extra installed (pyspark, pandas, matplotlib, markdown)")
    requires = importlib.metadata.requires("ledgercache") or []
    core = {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower() for r in requires if "extra ==" not in r}
    print(f"  declared dependencies: {', '.join(sorted(core))}")

    t0 = time.monotonic()
    before = set(sys.modules)
    import ledgercache as lc

    check(
        Path(lc.__file__).resolve().is_relative_to(site),
        f"import ledgercache from site-packages ({Path(lc.__file__).parent})",
    )
    # Top-level modules the import loaded from site-packages (Cython's `cython_runtime` has no file).
    loaded = {
        m
        for m, mod in list(sys.modules.items())
        if "." not in m
        and m not in before
        and m != "ledgercache"
        and site in Path(getattr(mod, "__file__", None) or "/").resolve().parents
    }
    owners = importlib.metadata.packages_distributions()
    loaded_dists = {owners.get(m, [m])[0].lower() for m in loaded}
    check(
        loaded_dists <= core,
        f"modules loaded at import come from declared dependencies ({', '.join(sorted(loaded_dists))})",
    )
    check(not set(LAB) & loaded, "import loads no lab module")

    trace = lc.workload.generate({"producerRate": 100, "testDurationMinutes": 0.05}, seed=1)
    summary = lc.replay(trace, lc.CacheConfig(cache_size_bytes=1 << 20))
    row = summary.to_pylist()[0]
    check(
        summary.num_rows == 1 and row["entries_read"] > 0,
        f"a small replay: {trace.num_rows} events, hit ratio {row['hit_ratio']:.3f}",
    )
    print(f"  import and replay took {time.monotonic() - t0:.1f}s")

    print("== the command line")
    cli = str(bindir / "ledgercache")
    work = Path(sys.prefix) / "cli-work"  # inside the clone (target/wheel-venv/), like everything here
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    r = run(cli, "--help", cwd=work)
    check(r.returncode == 0 and r.stdout.startswith("usage: ledgercache"), "ledgercache --help")
    r = run(cli, "generate", "seek-storm", "-o", "trace.parquet", "--duration-minutes", "0.05", cwd=work)
    check(r.returncode == 0, f"ledgercache generate: {r.stdout.strip() or r.stderr.strip()}")
    r = run(cli, "replay", "trace.parquet", "-o", "replayed", "--strategy", "pip430", "--cache-size", "1MiB", cwd=work)
    check(
        r.returncode == 0 and (work / "replayed" / "summary.parquet").exists(),
        f"ledgercache replay: {r.stdout.strip().splitlines()[-1] if r.returncode == 0 else r.stderr.strip()}",
    )
    t = time.monotonic()
    r = run(cli, "compare", "seek-storm", "--local", "-o", "report", cwd=work)
    took = time.monotonic() - t
    lines = r.stderr.strip().splitlines()
    print(f"  ledgercache compare: exit {r.returncode} in {took:.1f}s: {r.stderr.strip()}")
    check(
        r.returncode == 2 and len(lines) == 1 and 'pip install "ledgercache[lab]"' in lines[0],
        "compare without the lab extra: exit 2, one line naming the extra",
    )
    check(not (work / "report").exists() and "generated" not in r.stderr, "... before computing anything")
    r = run(cli, "demo", "-o", "demo", cwd=work)
    check(
        r.returncode == 2 and "pyspark" in r.stderr and "ledgercache[lab]" in r.stderr,
        f"demo names the extra too: {r.stderr.strip()}",
    )
    print("wheel-check: all checks passed")


if __name__ == "__main__":
    main()
