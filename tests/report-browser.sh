#!/usr/bin/env bash
# report-browser.sh BUILD_DIR — the HTML report (`pptune --report`) in a real browser, headless
# Chromium (scripts/install-deps.sh installs it): at 1,366 px wide (a laptop) and at 1,024 px (an
# A4 landscape page's printable width at 96 dpi) the page does not overflow horizontally
# (document.scrollWidth <= innerWidth, measured by a script in a copy of the page: the report
# itself has none); the page holds the rejection reasons and the Pareto chart of --explain, the
# leaderboard has no empty column, and it prints to a PDF. Exit 77 (skipped) only when chromium
# is absent.
set -u
build=$(cd "$1" && pwd)
command -v chromium >/dev/null 2>&1 || { echo "chromium is not installed: skipped"; exit 77; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "report-browser: $*"; exit 1; }
cd "$work" || exit 1
"$build/tuner/pptune" --model gpt-13b --nodes 32 --no-save --report r.html > search.out 2>&1 ||
  fail "the search failed: $(tail -5 search.out)"
grep -q '<script' r.html && fail "the report carries a script"
# the copy that measures itself: its widths written into the DOM that --dump-dom prints
sed 's|</body>|<script>document.body.setAttribute("data-overflow", document.documentElement.scrollWidth + " " + window.innerWidth);</script></body>|' r.html > m.html
flags=(--headless --no-sandbox --disable-gpu --hide-scrollbars --force-device-scale-factor=1)
for width in 1366 1024; do
  HOME=$work timeout 120 chromium "${flags[@]}" --window-size=$width,900 --dump-dom \
    "file://$work/m.html" > dom.html 2> chromium.err || fail "chromium failed: $(tail -5 chromium.err)"
  read -r scroll inner < <(sed -n 's/.*data-overflow="\([0-9]*\) \([0-9]*\)".*/\1 \2/p' dom.html)
  [ -n "${scroll:-}" ] || fail "no measurement in the DOM (script did not run?)"
  [ "$inner" -eq "$width" ] || fail "the window is $inner px wide, not $width"
  [ "$scroll" -le "$inner" ] || fail "at $width px the page is $scroll px wide: horizontal overflow"
  echo "at $width px: scrollWidth $scroll <= innerWidth $inner"
done
# what --explain says: the reasons (with the search's own count) and the Pareto chart's points
grep -q 'Rejected candidates by reason' dom.html || fail "no rejection reasons"
grep -q 'does not fit: rank' dom.html || fail "no memory reason with its parts"
points=$(sed -n '/aria-label="Pareto front/,/<\/svg>/p' dom.html | grep -c '<circle')
[ "$points" -ge 2 ] || fail "the Pareto chart has $points points"
grep -q 'Best of each schedule' dom.html || fail "no schedule bests"
grep -q '<td class="l">gpipe</td>' dom.html || fail "gpipe is missing from the schedule bests"
# no empty column: without trials the leaderboard has no measured columns
grep -q 'measured step s' dom.html && fail "measured columns without trials"
HOME=$work timeout 120 chromium "${flags[@]}" --no-pdf-header-footer --print-to-pdf=r.pdf \
  "file://$work/r.html" 2> chromium.err || fail "printing failed: $(tail -5 chromium.err)"
head -c 5 r.pdf | grep -q '%PDF-' || fail "no PDF"
echo "report-browser: ok ($points Pareto points, $(wc -c < r.pdf) bytes of PDF)"
