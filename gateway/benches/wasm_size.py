#!/usr/bin/env python3
"""How much of the release gateway binary is the WebAssembly engine.

A measurement, not a test: it prints and asserts nothing.

To try this:
  1. cargo build --release -p gateway
  2. python3 gateway/benches/wasm_size.py [path/to/gateway]
  3. for the exact figure, build without the engine and compare sizes:
     cargo build --release -p gateway --no-default-features

It reads the symbol table (`nm -S -C`, the release profile keeps symbols)
and adds up the code and data symbols by the crate their demangled path
starts with. With fat LTO, code inlined across crates is counted where it
ended up, and generic code where it was instantiated, so the shares are
estimates; the total of the engine's crates is the figure to quote.
"""

import collections
import os
import re
import subprocess
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
# The 39 crates only wasmtime brings in: `cargo tree -p gateway -e normal`
# with and without the `wasm` feature, compared (object is the gateway's own).
ENGINE = re.compile(
    r"^(wasmtime\w*|cranelift\w*|pulley\w*|wasmparser|wasm_encoder|wasmprinter|wast|wat|"
    r"regalloc2|gimli|target_lexicon|postcard|cobs|arbitrary|bumpalo|memfd|rustix|"
    r"linux_raw_sys|semver|leb128fmt|termcolor|unicode_width)$")


def crate_of(name):
    name = name.lstrip("<&*( ")
    m = re.match(r"([A-Za-z_][A-Za-z0-9_]*)::", name)
    return m.group(1) if m else "(other)"


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "target/release/gateway")
    size = os.path.getsize(binary)
    out = subprocess.run(["nm", "-S", "-C", "--defined-only", binary],
                         capture_output=True, text=True, check=True).stdout
    by_crate = collections.Counter()
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if len(parts) < 4 or parts[2] not in "tTrRdDbB":
            continue
        by_crate[crate_of(parts[3])] += int(parts[1], 16)
    total = sum(by_crate.values())
    engine = sum(v for k, v in by_crate.items() if ENGINE.match(k))
    mib = 1 << 20
    print(f"{binary}: {size / mib:.1f} MiB on disk, {total / mib:.1f} MiB in sized symbols")
    print(f"engine crates (wasmtime, cranelift, wasmparser, regalloc2, gimli, ...): "
          f"{engine / mib:.1f} MiB = {100 * engine / total:.0f}% of the symbols")
    for crate, n in by_crate.most_common(15):
        mark = "*" if ENGINE.match(crate) else " "
        print(f"  {mark} {crate:28} {n / mib:6.2f} MiB")


if __name__ == "__main__":
    main()
