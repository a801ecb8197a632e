"""Load a page in headless Chromium from the command line: its DOM, a screenshot and its JS errors.

Chromium's ``--enable-logging=stderr`` prints every console message as ``INFO:CONSOLE`` whatever its
level (``console.log`` and ``console.error`` look the same), so errors are caught inside the page
instead: :func:`load_in_browser` loads a COPY of the page with a small recorder injected first in
``<head>``. The recorder keeps ``console.error`` calls, uncaught exceptions (``window.onerror``),
unhandled promise rejections, resources that failed to load (a page that reaches for the network
fails here: DNS is mapped to nothing) and every ``alert``/``confirm``/``prompt`` call, and writes
them into the DOM, which ``--dump-dom`` returns. As a second net, stderr's ``Uncaught`` console
lines count as errors too. Every browser run has a timeout, so a hung browser cannot hang the tests.
"""

from __future__ import annotations

import html
import os
import re
import shutil
import signal
import struct
import subprocess
import tempfile
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from subprocess import PIPE

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
RECORDER_ID = "__browser_test_log__"
_ENTRY = re.compile(rf'<pre data-kind="(error|dialog)" data-log="{RECORDER_ID}">(.*?)</pre>', re.S)
_RECORDER_BLOCK = re.compile(rf'<div id="{RECORDER_ID}"[^>]*>.*?</div>', re.S)
_RECORDER_SCRIPT = re.compile(rf'<script id="{RECORDER_ID}-js">.*?</script>', re.S)
_UNCAUGHT = re.compile(r':CONSOLE[^\]]*\] "(Uncaught [^"]*)"')

RECORDER = f"""<script id="{RECORDER_ID}-js">(function () {{
  var box = null;
  function log(kind, text) {{
    if (!box) {{
      box = document.createElement('div');
      box.id = '{RECORDER_ID}';
      box.hidden = true;
      document.documentElement.appendChild(box);
    }}
    var pre = document.createElement('pre');
    pre.setAttribute('data-kind', kind);
    pre.setAttribute('data-log', '{RECORDER_ID}');
    pre.textContent = String(text);
    box.appendChild(pre);
  }}
  var original = console.error;
  console.error = function () {{
    log('error', 'console.error: ' + Array.prototype.map.call(arguments, String).join(' '));
    return original.apply(console, arguments);
  }};
  window.addEventListener('error', function (e) {{
    if (e.target && e.target !== window && (e.target.src || e.target.href)) {{
      log('error', 'failed to load: ' + (e.target.src || e.target.href));
    }} else {{
      log('error', 'uncaught: ' + e.message + ' at ' + e.filename + ':' + e.lineno);
    }}
  }}, true);
  window.addEventListener('unhandledrejection', function (e) {{
    log('error', 'unhandled rejection: ' + (e.reason && e.reason.stack || e.reason));
  }});
  ['alert', 'confirm', 'prompt', 'print'].forEach(function (name) {{
    window[name] = function (message) {{ log('dialog', name + ': ' + message); return null; }};
  }});
}})();</script>"""


@dataclass(frozen=True)
class BrowserResult:
    """What a page did in the browser: its JS errors, the DOM after scripts ran, a screenshot."""

    console_errors: list[str]
    dom: str
    screenshot: Path
    dialogs: list[str] = field(default_factory=list)  # alert/confirm/prompt/print calls


def find_chromium() -> str | None:
    """The path of a Chromium-family browser on PATH, or None."""
    for name in BROWSERS:
        path = shutil.which(name)
        if path:
            return path
    return None


def _with_recorder(page: str) -> str:
    """The page with the recorder as the first thing parsed, so it sees every later script."""
    match = re.search(r"<head[^>]*>", page, re.I)
    if match:
        return page[: match.end()] + RECORDER + page[match.end() :]
    return RECORDER + page


def load_in_browser(
    html_path: Path,
    out_dir: Path,
    *,
    window: tuple[int, int] = (1280, 2400),
    scale: float = 1.0,
    budget_ms: int = 5000,
    timeout_s: float = 60.0,
) -> BrowserResult:
    """Load ``html_path`` (a copy with the error recorder) in headless Chromium; fails without one.

    ``scale`` is the device scale factor of the screenshot (0.25 gives a quarter of the pixels in
    each direction for a quick check). Raises ``subprocess.TimeoutExpired`` when the browser hangs
    twice for ``timeout_s`` (headless Chromium on a loaded machine has hung once in a suite run, at
    start-up, before it read the page; a page that hangs it hangs it every time).
    """
    try:
        return _load_once(html_path, out_dir, window, scale, budget_ms, timeout_s)
    except subprocess.TimeoutExpired:
        return _load_once(html_path, out_dir, window, scale, budget_ms, timeout_s)


def _load_once(
    html_path: Path, out_dir: Path, window: tuple[int, int], scale: float, budget_ms: int, timeout_s: float
) -> BrowserResult:
    browser = find_chromium()
    if browser is None:
        raise FileNotFoundError(f"no browser on PATH (looked for {', '.join(BROWSERS)})")
    out_dir.mkdir(parents=True, exist_ok=True)
    page = out_dir / f"{html_path.stem}.recorded.html"
    page.write_text(_with_recorder(Path(html_path).read_text(encoding="utf-8")), encoding="utf-8")
    screenshot = out_dir / f"{html_path.stem}.png"
    screenshot.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        cmd = [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--disable-dev-shm-usage",
            "--mute-audio",
            "--hide-scrollbars",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            f"--virtual-time-budget={budget_ms}",
            "--run-all-compositor-stages-before-draw",
            f"--window-size={window[0]},{window[1]}",
            f"--force-device-scale-factor={scale}",
            f"--screenshot={screenshot}",
            "--dump-dom",
            page.resolve().as_uri(),
        ]
        # Its own process group, so a timeout ends the browser's helper processes too.
        proc = subprocess.Popen(cmd, stdout=PIPE, stderr=PIPE, text=True, start_new_session=True)
        try:
            stdout, stderr = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise
    if proc.returncode != 0 or not screenshot.exists():
        raise RuntimeError(f"{browser} exited {proc.returncode}: {stderr[-2000:]}")
    dom = stdout
    errors, dialogs = [], []
    for kind, text in _ENTRY.findall(dom):
        (errors if kind == "error" else dialogs).append(html.unescape(text))
    for m in _UNCAUGHT.finditer(stderr):
        text = m.group(1)
        if not any(re.sub(r"^Uncaught (\(in promise\) )?", "", text) in e for e in errors):
            errors.append(f"stderr: {text}")
    dom = _RECORDER_SCRIPT.sub("", _RECORDER_BLOCK.sub("", dom))
    return BrowserResult(console_errors=errors, dom=dom, screenshot=screenshot, dialogs=dialogs)


# -------------------------------------------------------------------------------------------- PNG


def png_pixels(path: Path) -> tuple[int, int, int, bytes]:
    """Decode an 8-bit, non-interlaced RGB/RGBA PNG: (width, height, channels, raw pixel bytes)."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG")
    pos, idat = 8, []
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour, _c, _f, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or interlace or colour not in (2, 6):
                raise ValueError(
                    f"unsupported PNG: depth {depth}, colour type {colour}, interlace {interlace}"
                )
            channels = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    out = bytearray(height * stride)
    prev = bytearray(stride)
    for y in range(height):
        start = y * (stride + 1)
        ftype, line = raw[start], bytearray(raw[start + 1 : start + 1 + stride])
        if ftype == 1:
            for i in range(channels, stride):
                line[i] = (line[i] + line[i - channels]) & 0xFF
        elif ftype == 2:
            line = bytearray((a + b) & 0xFF for a, b in zip(line, prev, strict=True))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - channels] if i >= channels else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 0xFF
        elif ftype == 4:
            for i in range(stride):
                a = line[i - channels] if i >= channels else 0
                b, c = prev[i], (prev[i - channels] if i >= channels else 0)
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        out[y * stride : (y + 1) * stride] = line
        prev = line
    return width, height, channels, bytes(out)


def non_white_fraction(path: Path, threshold: int = 245) -> float:
    """The share of a PNG's pixels that are not (near) white: 0 for a blank page."""
    width, height, channels, pixels = png_pixels(path)
    total = width * height
    if total == 0:
        return 0.0
    white = 0
    for i in range(0, len(pixels), channels):
        if pixels[i] >= threshold and pixels[i + 1] >= threshold and pixels[i + 2] >= threshold:
            white += 1
    return 1 - white / total
