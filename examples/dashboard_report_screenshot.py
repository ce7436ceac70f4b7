"""A screenshot of a simulation's report.html, as in docs/dashboard.md and the README.

Runs `firmament-py simulate` on a 100-machine Google-shaped workload (the README's quick start,
two simulated minutes), then opens its report.html in headless Chromium (Debian's `chromium`
and `chromium-driver`) and saves what it shows.

    python examples/dashboard_report_screenshot.py docs/images/report.png
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service


def main(target: Path) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        out = Path(scratch) / "run"
        subprocess.run(
            [
                sys.executable, "-m", "firmament_py.cli", "simulate", "--synthetic", "google-100",
                "--load", "2", "--speedup", "50", "--duration", "120", "--out", str(out), "--quiet",
            ],
            check=True,
        )  # fmt: skip
        options = Options()
        options.binary_location = shutil.which("chromium") or "chromium"
        for argument in ("--headless=new", "--no-sandbox", "--window-size=1400,1250"):
            options.add_argument(argument)
        driver = webdriver.Chrome(options=options, service=Service(shutil.which("chromedriver")))
        try:
            driver.get((out / "report.html").as_uri())
            time.sleep(3)  # Bokeh draws after the page loads
            target.parent.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(target))
        finally:
            driver.quit()
    print(f"wrote {target}")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "report.png"))
