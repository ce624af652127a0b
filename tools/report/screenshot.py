#!/usr/bin/python3
"""Screenshots a report page as a browser shows it: Debian's chromium headless, cropped to the
page's content and reduced to 256 colours (docs/report.md's pictures are made with it).

Usage: tools/report/screenshot.py REPORT_DIR/index.html OUT.png [--width PIXELS]

Needs `chromium` (apt-get install chromium) and Pillow (python3-pil, a matplotlib dependency).
Run by hand; CI checks the figures' layout itself (tests/tools/report_figures_test.py).
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

from PIL import Image, ImageChops


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("page")
    parser.add_argument("out")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=6000, help="the longest page to capture")
    args = parser.parse_args(argv)
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    if not browser:
        print("error: no chromium on PATH (apt-get install chromium)", file=sys.stderr)
        return 1
    if not os.path.isfile(args.page):
        print(f"error: {args.page}: no such page", file=sys.stderr)
        return 1
    if os.path.abspath(args.out) == os.path.abspath(args.page):
        print("error: the screenshot would overwrite the page", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as work:
        raw = os.path.join(work, "raw.png")
        run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                              f"--window-size={args.width},{args.height}", f"--screenshot={raw}",
                              "file://" + os.path.abspath(args.page)],
                             capture_output=True, text=True, check=False)
        if run.returncode != 0 or not os.path.isfile(raw):
            print(f"error: chromium failed: {run.stderr[-2000:]}", file=sys.stderr)
            return 1
        image = Image.open(raw).convert("RGB")
        # Crop the blank below the page's content (and keep a margin).
        box = ImageChops.difference(image, Image.new("RGB", image.size, (255, 255, 255))).getbbox()
        if box:
            image = image.crop((0, 0, image.width, min(image.height, box[3] + 24)))
        temporary = args.out + ".tmp"
        image.quantize(colors=256).save(temporary, format="PNG", optimize=True)
        os.replace(temporary, args.out)
    print(f"{args.out}: {image.width}×{image.height}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
