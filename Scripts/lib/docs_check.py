"""Checks the documentation site in a real browser: serves it on 127.0.0.1 (a DocC site loads its
pages with fetch, which file:// does not allow), has headless chromium render the landing page
and a symbol page, and asserts that their titles and a symbol's declaration are in the rendered
page, not only in the JSON.

    python3 Scripts/lib/docs_check.py SITE_DIR

Every wait has a deadline: the server is polled until it answers, chromium is given a budget of
virtual time and a deadline of real time. The server is stopped whatever happens.
"""
import html.parser
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

SERVER_DEADLINE = 15  # seconds for http.server to answer
BROWSER_DEADLINE = 120  # seconds of real time for one chromium run
VIRTUAL_TIME = 20000  # milliseconds of virtual time chromium gives the page's scripts and fetches

# (path, what the rendered page must show): the landing page, an article and a symbol page.
PAGES = [
    ('documentation/sharedstore/', [
        'SharedStore',
        'One persistent store that several cooperating processes share on Linux',
        'The Core Data playbook on Linux',
        'Getting Started',
        'Container',
    ]),
    ('documentation/sharedstore/gettingstarted', [
        'Getting Started',
        'Declare the model',
    ]),
    ('documentation/sharedstore/container', [
        'Container',
        'final class Container',
        'A store opened on an app-group directory',
        'func newContext(name: String?, author: String?) -> ObjectContext',
    ]),
]


class Text(html.parser.HTMLParser):
    """The text a page shows: tags dropped, scripts and styles left out, spaces collapsed."""

    def __init__(self):
        super().__init__()
        self.parts, self.skip = [], 0

    def handle_starttag(self, tag, attrs):
        if tag in ('script', 'style', 'noscript'):
            self.skip += 1

    def handle_endtag(self, tag):
        if tag in ('script', 'style', 'noscript') and self.skip:
            self.skip -= 1

    def handle_data(self, data):
        if not self.skip:
            self.parts.append(data)

    def text(self):
        return re.sub(r'\s+', ' ', ''.join(self.parts))


def start_server(site):
    """http.server on a port the kernel picks (port 0), read back from its first line."""
    server = subprocess.Popen(
        [sys.executable, '-u', '-m', 'http.server', '0', '--bind', '127.0.0.1', '--directory', site],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    line = server.stdout.readline()  # "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
    match = re.search(r'port (\d+)', line)
    if not match:
        server.kill()
        sys.exit(f'docs check: http.server did not start: {line!r}')
    # Its request log goes to stderr (dropped); stdout is not read again.
    return server, int(match.group(1))


def wait_until_answers(url):
    deadline = time.monotonic() + SERVER_DEADLINE
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            pass
        if time.monotonic() > deadline:
            sys.exit(f'docs check: {url} did not answer within {SERVER_DEADLINE} s')
        time.sleep(0.05)  # one poll step, not a wait for an event


def render(browser, url, profile):
    """The DOM chromium rendered for url, once the page's scripts ran out of work."""
    command = [browser, '--headless', '--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage',
               '--no-first-run', f'--user-data-dir={profile}', f'--virtual-time-budget={VIRTUAL_TIME}',
               '--dump-dom', url]
    try:
        result = subprocess.run(command, capture_output=True, text=True, timeout=BROWSER_DEADLINE)
    except subprocess.TimeoutExpired:
        sys.exit(f'docs check: chromium did not render {url} within {BROWSER_DEADLINE} s')
    if result.returncode != 0 or not result.stdout.strip():
        sys.exit(f'docs check: chromium failed on {url} (exit {result.returncode}):\n{result.stderr[-2000:]}')
    return result.stdout


def main():
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit('usage: docs_check.py SITE_DIR')
    site = sys.argv[1]
    browser = shutil.which('chromium')
    if not browser:
        sys.exit('docs check: no chromium; install it with: sudo apt-get install chromium '
                 '(Scripts/test.sh installs it when run as root)')
    server, port = start_server(site)
    profile = tempfile.mkdtemp(prefix='sharedstore-docs-chromium-')
    failures = []
    try:
        base = f'http://127.0.0.1:{port}/'
        wait_until_answers(base + PAGES[0][0])
        for path, wanted in PAGES:
            shown = Text()
            shown.feed(render(browser, base + path, profile))
            text = shown.text()
            missing = [w for w in wanted if w not in text]
            if missing:
                failures.append(f'{path}: the rendered page lacks {missing} (it shows: {text[:300]!r})')
            else:
                print(f'docs check: {path} rendered with {", ".join(repr(w) for w in wanted[:2])}')
    finally:
        server.terminate()
        try:
            server.wait(timeout=5)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(profile, ignore_errors=True)
    if failures:
        sys.exit('docs check failed:\n' + '\n'.join(failures))
    print(f'docs check: chromium rendered {len(PAGES)} pages of the site, declarations included')


if __name__ == '__main__':
    main()
