#!/usr/bin/env python3
"""Checks manual pages against the C sources they describe: each option a source compares an
argument with (a string literal that is only an option: "--device", "-o") must be in the page,
and each option the page names must be one the sources accept. Prints what differs.

usage: check_options.py PAGE.1 SOURCE_DIR [PAGE.1 SOURCE_DIR...]"""
import pathlib
import re
import sys

OPTION = r"-(?:-[a-z][a-z0-9-]*|[a-z])"
IN_SOURCE = re.compile(r'"(' + OPTION + r')"')
# in roff, an option's dashes are written \-; a dash inside a word (six\-stem) is no option
IN_PAGE = re.compile(r"(?<![\w-])" + OPTION + r"(?![\w-])")


def source_options(folder):
    return {o for c in sorted(pathlib.Path(folder).glob("*.c"))
            for o in IN_SOURCE.findall(c.read_text())}


def page_options(page):
    return set(IN_PAGE.findall(pathlib.Path(page).read_text().replace("\\-", "-")))


def main(argv):
    if len(argv) < 3 or len(argv) % 2 == 0:
        print(__doc__)
        return 2
    bad = 0
    for page, folder in zip(argv[1::2], argv[2::2]):
        src, man = source_options(folder), page_options(page)
        for o in sorted(src - man):
            print(f"{page}: missing {o}, which {folder} accepts")
            bad += 1
        for o in sorted(man - src):
            print(f"{page}: names {o}, which {folder} does not accept")
            bad += 1
        print(f"{pathlib.Path(page).name}: {len(src)} options in the sources, {len(man)} in "
              "the page")
    print("FAIL" if bad else "OK")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
