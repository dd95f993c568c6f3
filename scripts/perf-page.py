#!/usr/bin/env python3
"""Writes the figures of the guide from the benchmark records.

Reads bench/results/*.json (tz-bench records) and writes, byte for byte the
same for the same records:

  docs/performance.md       the performance page: for each device the latest
                            record per configuration and codec, with its
                            commit, date and ceilings
  docs/performance.svg      ingest per codec beside its ceiling, per device
  bench/results/INDEX.md    the records grouped by device, latest first
  README.md                 its headline table, between the markers
                            <!-- headline:begin --> and <!-- headline:end -->

  scripts/perf-page.py                  # rewrite them in place
  scripts/perf-page.py --out-dir DIR    # write them under DIR instead (the
                                        # test command compares the two)

Python 3.11 standard library only. Records whose format it cannot classify
are skipped and counted on the index.
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "bench" / "results"
GIB = 1 << 30

# The headline: one row per (device, codec) of the standard stream (cam-32
# microscopy frames through `write`, shards discarded, default staging).
HEADLINE_CODECS = ["zstd 1", "blosc-lz4 1, byte shuffle", "none"]
PLOT_CODECS = [
    "zstd 1",
    "gzip 1",
    "blosc-zstd 1, byte shuffle",
    "blosc-zstd 1, bit shuffle",
    "blosc-lz4 1, byte shuffle",
    "blosc-lz4 1, bit shuffle",
    "blosc-zlib 1, byte shuffle",
    "none",
]


@dataclass
class Record:
    file: str
    date: str  # YYYY-MM-DD
    stamp: str  # full date as recorded, for ordering within a day
    commit: str
    device: str
    backend: str  # gpu | cpu
    config: str
    codec: str
    sink: str
    ingest: str
    gib: float
    best: float
    median: float | None
    ratio: float | None
    ceilings: list[tuple[str, float]] = field(default_factory=list)

    @property
    def standard(self) -> bool:
        """The stream the headline and the plot compare: cam-32, discard,
        write, with its ceiling measured in the same run."""
        return (
            self.config == "cam-32"
            and self.sink == "discard"
            and self.ingest == "write"
            and self.bound() is not None
        )

    def bound(self) -> tuple[str, float] | None:
        """The ceiling the stream is held to: on the GPU the slower of nvCOMP
        alone and the H2D copy (for `none`, H2D), on the CPU the codec's
        library on all cores."""
        got = dict(self.ceilings)
        if self.backend == "gpu":
            cands = [(n, v) for n, v in self.ceilings if n.startswith("nvcomp-")]
            if "h2d-pinned" in got:
                cands.append(("h2d-pinned", got["h2d-pinned"]))
        else:
            cands = [(n, v) for n, v in self.ceilings if n.startswith("cpu-")]
        return min(cands, key=lambda c: c[1]) if cands else None


def commit_of(d: dict, name: str) -> str | None:
    c = d.get("commit")
    raw = c.get("hash") if isinstance(c, dict) else c
    dirty = isinstance(c, dict) and c.get("dirty") is True
    raw = raw if isinstance(raw, str) else ""
    m = re.fullmatch(r"([0-9a-f]{7})[0-9a-f]*", raw)
    if m:
        short = m.group(1)
    elif re.match(r"[0-9a-f]{7}-", raw):
        short = raw[:7] + "+"  # that commit with changes on top, as recorded
    else:
        # Older records said "unknown" and named the commit in the file name.
        toks = [t for t in re.split(r"[-_.]", name) if re.fullmatch(r"[0-9a-f]{7}", t)]
        if len(toks) != 1:
            return None
        short = toks[0]
    return short + ("*" if dirty else "")


def codec_of(codec: dict) -> str | None:
    name = codec.get("name")
    if name == "none":
        return "none"
    level = codec.get("level")
    if name in ("zstd", "gzip"):
        return f"{name} {level}"
    if name == "blosc":
        shuffle = codec.get("shuffle", "byte")
        shuffle = "no shuffle" if shuffle == "none" else f"{shuffle} shuffle"
        return f"blosc-{codec.get('cname', 'zstd')} {level}, {shuffle}"
    return None


def device_of(d: dict, backend: str) -> str | None:
    dev = d.get("device") or {}
    if backend == "gpu":
        return dev.get("gpu")
    cores = dev.get("cores")
    if not isinstance(cores, int):
        return None
    cpu = re.sub(r"\(R\)|\(TM\)", "", str(dev.get("cpu") or "CPU")).strip()
    return f"CPU backend, {cores} cores ({cpu})"


def classify(path: Path) -> Record | None:
    try:
        d = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(d, dict):
        return None
    cfg, fig, be = d.get("configuration"), d.get("figures"), d.get("backend")
    if not (isinstance(cfg, dict) and isinstance(fig, dict) and isinstance(be, dict)):
        return None
    best = fig.get("best_gbps")
    backend = be.get("kind")
    js = cfg.get("json") or {}
    if not isinstance(best, (int, float)) or backend not in ("gpu", "cpu"):
        return None
    codec = codec_of(js.get("codec") or {})
    device = device_of(d, backend)
    commit = commit_of(d, path.name)
    date = str(d.get("date") or "")
    if not (codec and device and commit and re.match(r"\d{4}-\d\d-\d\d", date)):
        return None
    config = str(cfg.get("name") or "?")
    ms = js.get("multiscale")
    if isinstance(ms, dict):
        config += f" ({ms.get('levels')} levels, {ms.get('method')})"
    if js.get("staging_bytes"):
        config += f", staging {js['staging_bytes'] / GIB:g} GiB"
    sink_d = d.get("sink") or {}
    sink = sink_d.get("kind") if isinstance(sink_d, dict) else None
    if sink == "fs" and sink_d.get("fsync") is not None:
        sink += " fsync " + ("on" if sink_d["fsync"] else "off")
    data = d.get("data") or {}
    ceilings = []
    for c in d.get("ceilings") or []:
        if isinstance(c, dict) and isinstance(c.get("gbps"), (int, float)):
            ceilings.append((str(c.get("name")), float(c["gbps"])))
    ceilings.sort()
    med = fig.get("median_gbps")
    ratio = fig.get("compression_ratio")
    return Record(
        file=path.name,
        date=date[:10],
        stamp=date,
        commit=commit,
        device=device,
        backend=backend,
        config=config,
        codec=codec,
        sink=str(sink or "?"),
        ingest=str(fig.get("ingest") or "write"),
        gib=(data.get("bytes") or 0) / GIB,
        best=float(best),
        median=float(med) if isinstance(med, (int, float)) else None,
        ratio=float(ratio) if isinstance(ratio, (int, float)) else None,
        ceilings=ceilings,
    )


def load() -> tuple[list[Record], list[str], list[str]]:
    records, skipped = [], []
    for p in sorted(RESULTS.glob("*.json")):
        r = classify(p)
        (records.append(r) if r else skipped.append(p.name))
    others = sorted(p.name for p in RESULTS.iterdir() if p.is_file() and p.suffix in (".txt", ".csv"))
    return records, skipped, others


def device_order(records: list[Record]) -> list[str]:
    """GPUs first, then CPU backends by cores, most first; ties by name."""
    devs = {r.device: r for r in records}
    return sorted(devs, key=lambda n: (devs[n].backend != "gpu", -int(re.search(r"(\d+) cores", n).group(1)) if devs[n].backend == "cpu" else 0, n))


def pick(rs: list[Record]) -> Record:
    """The latest day's fastest record: a day's A/B runs put an older and a
    newer commit side by side in either order, and the one kept is faster."""
    day = max(r.date for r in rs)
    return max((r for r in rs if r.date == day), key=lambda r: (r.best, r.stamp, r.file))


def latest(records: list[Record]) -> dict[tuple, Record]:
    """The latest record per (device, configuration, codec, sink, ingest, GiB per run)."""
    groups: dict[tuple, list[Record]] = {}
    for r in records:
        groups.setdefault((r.device, r.config, r.codec, r.sink, r.ingest, r.gib), []).append(r)
    return {k: pick(v) for k, v in sorted(groups.items(), key=lambda kv: str(kv[0]))}


def f2(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def gib(x: float) -> str:
    return f"{x:g} GiB"


def ceil_text(r: Record) -> str:
    return ", ".join(f"{n} {v:.2f}" for n, v in r.ceilings)


def bound_text(r: Record) -> tuple[str, str]:
    b = r.bound()
    if not b:
        return "", ""
    return f"{b[0]} {b[1]:.2f}", f"{r.best / b[1]:.2f}"


def headline_rows(records: list[Record]) -> list[Record]:
    """Per device and headline codec, the latest standard record at default staging."""
    rows = []
    lat = latest([r for r in records if r.standard])
    for dev in device_order(records):
        for codec in HEADLINE_CODECS:
            cands = [r for (d, _c, cd, *_), r in lat.items() if d == dev and cd == codec]
            if cands:
                rows.append(pick(cands))
    return rows


def headline_table(records: list[Record], with_record: bool = False) -> str:
    extra = (" record |", " --- |") if with_record else ("", "")
    lines = [
        "| device | codec | GB/s | ceiling GB/s | / ceiling | data | date | commit |" + extra[0],
        "| --- | --- | --- | --- | --- | --- | --- | --- |" + extra[1],
    ]
    for r in headline_rows(records):
        bt, frac = bound_text(r)
        rec = f" `{r.file}` |" if with_record else ""
        lines.append(f"| {r.device} | {r.codec} | {f2(r.best)} | {bt} | {frac} | {gib(r.gib)} | {r.date} | {r.commit} |" + rec)
    return "\n".join(lines) + "\n"


def performance_page(records: list[Record], skipped: list[str]) -> str:
    out = [
        "<!-- Generated by scripts/perf-page.py from bench/results/*.json: do not edit. -->",
        "# Performance",
        "",
        "Every figure on this page comes from a benchmark record in `bench/results/`,",
        "written by `tz-bench` (see [Benchmarks](benchmarks.md)), and the page is",
        "generated from those records by `scripts/perf-page.py`; the test command",
        "fails when it is not current. The figure is the protocol's: bytes passed to",
        "`tz_write` divided by the seconds from the first write to the end of",
        "`tz_flush`, GB = 10^9 bytes, best of the record's runs (median beside it).",
        "Ceilings are measured in the same run on the same tiles: `nvcomp-*` is",
        "nvCOMP alone on tiles already on the device, `h2d-pinned` the copy from",
        "page-locked memory to the device, `copy-h2d` the frames copied into",
        "page-locked memory and sent to the device, `pcie-duplex` the copy both ways",
        "at once, `host-copy` the copy into staging, `cpu-*` the codec's library on",
        "all cores. *bound* is the ceiling the stream is held to: on the GPU the",
        "slower of nvCOMP alone and the H2D copy, on the CPU the codec's library.",
        "",
        "Why each figure is what it is, and how it moved change by change:",
        "[Measured figures](measured-figures.md) and the",
        "[performance log](performance-log.md). A commit marked `+` is that commit",
        "with changes on top, one marked `*` a build from a tree with uncommitted",
        "changes, as the record says.",
        "",
        "## Headline",
        "",
        "cam-32 (2048 × 2048 uint16 microscopy frames, tiles of 32³, shards of",
        "32 × 512 × 512) through `tz_write`, shards discarded, default staging, the",
        "latest record per device and codec (of the latest day's records, the",
        "fastest: a day's A/B runs put an older and a newer commit side by side).",
        "The README shows this table, without the record column:",
        "",
        headline_table(records, with_record=True).rstrip("\n"),
        "",
        "![Ingest per codec beside its ceiling, per device](performance.svg)",
        "",
    ]
    lat = latest(records)
    for dev in device_order(records):
        rows = sorted((r for k, r in lat.items() if k[0] == dev), key=lambda r: (r.config, r.sink, r.ingest, r.gib, r.codec))
        n = sum(1 for r in records if r.device == dev)
        out += [
            f"## {dev}",
            "",
            f"{n} records; the latest per configuration, codec, sink, ingest path and",
            "amount streamed per run:",
            "",
            "| configuration | sink | ingest | per run | codec | GB/s best / median | ratio | bound | / bound | other ceilings GB/s | date | commit | record |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in rows:
            bt, frac = bound_text(r)
            b = r.bound()
            others = ", ".join(f"{nm} {v:.2f}" for nm, v in r.ceilings if not b or nm != b[0])
            med = f" / {f2(r.median)}" if r.median is not None else ""
            out.append(
                f"| {r.config} | {r.sink} | {r.ingest} | {gib(r.gib)} | {r.codec} | {f2(r.best)}{med} | {f2(r.ratio)} | {bt} | {frac} | {others} | {r.date} | {r.commit} | `{r.file}` |"
            )
        out.append("")
    out += [
        "## The records",
        "",
        f"{len(records)} records are classified here; {len(skipped)} JSON records of",
        "other formats and the text records (sweeps, A/B runs, probes, timelines)",
        "are listed in `bench/results/INDEX.md`.",
        "",
    ]
    return "\n".join(out)


def esc(s: str) -> str:
    return s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def plot(records: list[Record]) -> str:
    """Horizontal bars: per device a panel, per codec the ingest and its bound."""
    lat = latest([r for r in records if r.standard and "staging" not in r.config])
    panels = []
    for dev in device_order(records):
        rows = []
        for codec in PLOT_CODECS:
            cands = [r for (d, _c, cd, *_), r in lat.items() if d == dev and cd == codec]
            if cands:
                rows.append(pick(cands))
        if rows:
            panels.append((dev, rows))
    width, label_w, bar_w, row_h, head_h = 1000, 230, 400, 30, 46
    height = 40 + sum(head_h + row_h * len(rows) + 10 for _, rows in panels) + 30
    s = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="#ffffff"/>',
        '<text x="10" y="22" font-size="15" font-weight="bold">Ingest per codec (dark) beside its ceiling (light), GB/s, cam-32 through tz_write</text>',
    ]
    y = 40
    for dev, rows in panels:
        top = max(max(r.best, (r.bound() or ("", 0))[1]) for r in rows)
        scale = bar_w / top
        s.append(f'<text x="10" y="{y + 18}" font-size="13" font-weight="bold">{esc(dev)}</text>')
        s.append(f'<text x="{label_w}" y="{y + 36}" fill="#555555">0 to {top:.1f} GB/s; latest record per codec</text>')
        y += head_h
        for r in rows:
            b = r.bound()
            s.append(f'<text x="{label_w - 8}" y="{y + 17}" text-anchor="end">{esc(r.codec)}</text>')
            if b:
                s.append(f'<rect x="{label_w}" y="{y + 3}" width="{b[1] * scale:.1f}" height="22" fill="#c6dbef"/>')
            s.append(f'<rect x="{label_w}" y="{y + 7}" width="{r.best * scale:.1f}" height="14" fill="#2171b5"/>')
            note = f"{r.best:.2f}" + (f" of {b[0]} {b[1]:.2f}" if b else "") + f" ({r.commit}, {r.date})"
            end = max(r.best, b[1] if b else 0) * scale
            s.append(f'<text x="{label_w + end + 6:.1f}" y="{y + 18}" fill="#333333">{esc(note)}</text>')
            y += row_h
        y += 10
    s.append(f'<text x="10" y="{height - 10}" fill="#555555">Generated by scripts/perf-page.py from bench/results/*.json</text>')
    s.append("</svg>")
    return "\n".join(s) + "\n"


def index(records: list[Record], skipped: list[str], others: list[str]) -> str:
    total = len(records) + len(skipped) + len(others)
    out = [
        "<!-- Generated by scripts/perf-page.py: do not edit. -->",
        "# Benchmark records",
        "",
        f"{total} records: {len(records)} `tz-bench` JSON records classified by device below,",
        f"{len(skipped)} JSON records of other formats, {len(others)} text and CSV records",
        "(sweeps, A/B runs, probes, timelines). Files are never renamed: the guide",
        "and the performance log name them. The figures, device by device:",
        "[the performance page](../../docs/performance.md).",
        "",
    ]
    lat = latest(records)
    for dev in device_order(records):
        mine = [r for r in records if r.device == dev]
        dates = sorted({r.date for r in mine})
        out += [f"## {dev}", "", f"{len(mine)} records, {dates[0]} to {dates[-1]}. The latest per configuration and codec:", ""]
        out += ["| date | commit | configuration | sink, ingest, per run | codec | GB/s | record |", "| --- | --- | --- | --- | --- | --- | --- |"]
        rows = sorted((r for k, r in lat.items() if k[0] == dev), key=lambda r: (r.stamp, r.file), reverse=True)
        for r in rows:
            out.append(f"| {r.date} | {r.commit} | {r.config} | {r.sink}, {r.ingest}, {gib(r.gib)} | {r.codec} | {f2(r.best)} | [{r.file}]({r.file}) |")
        older = len(mine) - len(rows)
        if older:
            by_day: dict[str, int] = {}
            for r in mine:
                if r not in rows:
                    by_day[r.date] = by_day.get(r.date, 0) + 1
            days = ", ".join(f"{d}: {n}" for d, n in sorted(by_day.items()))
            out += ["", f"{older} older records of this device, by day ({days}), are the history the performance log tells."]
        out.append("")
    out += ["## Other records", "", "Text and CSV records, by day:", ""]
    by_day2: dict[str, list[str]] = {}
    for name in others:
        by_day2.setdefault(name[:10], []).append(name)
    for day, names in sorted(by_day2.items(), reverse=True):
        out.append(f"- {day}: " + ", ".join(f"[{n[11:] or n}]({n})" for n in names))
    out += ["", f"JSON records this index cannot classify (another format): {len(skipped)}", ""]
    out += [f"- [{n}]({n})" for n in skipped]
    out.append("")
    return "\n".join(out)


BEGIN, END = "<!-- headline:begin -->", "<!-- headline:end -->"


def readme(records: list[Record]) -> str:
    text = (REPO / "README.md").read_text()
    i, j = text.find(BEGIN), text.find(END)
    if i < 0 or j < i:
        sys.exit(f"perf-page: README.md lacks the markers {BEGIN} ... {END}")
    return text[: i + len(BEGIN)] + "\n" + headline_table(records) + text[j:]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out-dir", type=Path, default=REPO)
    a = ap.parse_args()
    records, skipped, others = load()
    files = {
        "docs/performance.md": performance_page(records, skipped),
        "docs/performance.svg": plot(records),
        "bench/results/INDEX.md": index(records, skipped, others),
        "README.md": readme(records),
    }
    for rel, text in files.items():
        p = a.out_dir / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)


if __name__ == "__main__":
    main()
