"""The HTML report in headless Chromium: it renders, the radar and case table are there, and
the page makes no network request (issue 7 item 4).

Needs Debian's chromium at /usr/bin/chromium (``apt-get install -y chromium``; CI installs it).
"""

from __future__ import annotations

import json
import re
import struct
import subprocess
import zlib
from pathlib import Path

import pytest
from click.testing import CliRunner

from ledger.cli import main

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--hide-scrollbars",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--window-size=1280,1600",
]
RADAR_BLUE = (0x1F, 0x6F, 0xEB)  # the first run's stroke colour

pytestmark = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs /usr/bin/chromium"),
]


def _png_pixels(data: bytes) -> tuple[int, int, list[tuple[int, int, int]]]:
    """A tiny PNG decoder (8-bit RGB or RGBA, no interlace): width, height, RGB pixels."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", None
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    assert header is not None
    width, height, depth, color, _, _, interlace = header
    assert depth == 8
    assert color in (2, 6)
    assert interlace == 0
    bpp = 3 if color == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    prev = bytearray(stride)
    pixels = []
    for y in range(height):
        start = y * (stride + 1)
        filt, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = prev[i]
            c = prev[i - bpp] if i >= bpp else 0
            if filt == 1:
                line[i] = (line[i] + a) & 0xFF
            elif filt == 2:
                line[i] = (line[i] + b) & 0xFF
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xFF
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 0xFF
        pixels.extend(tuple(line[i : i + 3]) for i in range(0, stride, bpp))
        prev = line
    return width, height, pixels


def _chromium(tmp: Path, page: Path, *extra: str) -> tuple[subprocess.CompletedProcess, dict]:
    net = tmp / f"{page.stem}.netlog.json"
    done = subprocess.run(
        [str(CHROMIUM), *FLAGS, f"--log-net-log={net}", *extra, page.as_uri()],
        capture_output=True,
        timeout=120,
        cwd=tmp,
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return done, json.loads(net.read_text())


def _page_requests(netlog: dict) -> list[str]:
    """URLs the page itself asked for (browser housekeeping has initiator 'not an origin')."""
    names = {v: k for k, v in netlog["constants"]["logEventTypes"].items()}
    found = []
    for event in netlog["events"]:
        params = event.get("params", {})
        if names.get(event["type"]) != "URL_REQUEST_START_JOB" or "url" not in params:
            continue
        if params.get("initiator") == "not an origin":
            continue
        if not params["url"].startswith(("file:", "data:")):
            found.append(params["url"])
    return found


@pytest.fixture
def report_html(real_ledger: Path, tmp_path: Path) -> Path:
    out = tmp_path / "report.html"
    result = CliRunner().invoke(
        main, ["--ledger", str(real_ledger), "report", "--format", "html", "-o", str(out)]
    )
    assert result.exit_code == 0, result.stderr
    return out


def test_html_has_no_external_reference(report_html: Path):
    text = report_html.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)\s*=\s*["']?\s*(https?:)?//""", text, re.I)
    assert "url(" not in text.split("</style>")[0]  # no CSS fetches
    assert "<script" not in text
    assert "<link" not in text
    assert "Content-Security-Policy" in text
    assert "default-src 'none'" in text


def test_html_renders_in_chromium(report_html: Path, tmp_path: Path):
    shot = tmp_path / "shot.png"
    _, netlog = _chromium(tmp_path, report_html, f"--screenshot={shot}")
    assert _page_requests(netlog) == []
    width, height, pixels = _png_pixels(shot.read_bytes())
    assert (width, height) == (1280, 1600)
    non_white = sum(1 for p in pixels if p != (255, 255, 255))
    assert non_white > len(pixels) // 50, "screenshot is (nearly) blank"
    lum = [(299 * r + 587 * g + 114 * b) // 1000 for r, g, b in pixels]
    mean = sum(lum) / len(lum)
    variance = sum((v - mean) ** 2 for v in lum) / len(lum)
    assert variance > 100
    # the radar's stroke colour is on screen
    assert (
        sum(1 for p in pixels if all(abs(x - y) <= 8 for x, y in zip(p, RADAR_BLUE, strict=True)))
        > 50
    )
    dom, _ = _chromium(tmp_path, report_html, "--dump-dom")
    html = dom.stdout.decode("utf-8")
    assert html.count('<figure class="radar">') == 2  # the model run and the self-test
    assert '<div id="cases"><table>' in html
    assert "sf-07" in html


def test_the_request_detector_sees_a_fetch(tmp_path: Path):
    """Control: a page that loads an image over HTTP is caught by the same detector."""
    page = tmp_path / "fetching.html"
    page.write_text('<img src="http://127.0.0.1:9/x.png"><p>x</p>', encoding="utf-8")
    _, netlog = _chromium(tmp_path, page, "--dump-dom")
    assert _page_requests(netlog) == ["http://127.0.0.1:9/x.png"]
