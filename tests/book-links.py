#!/usr/bin/env python3
"""Every relative link and asset of the built book (mdbook build docs) leads to a file, and every
#fragment to an id on its page. Usage: book-links.py BOOK_DIR. Exit 1 naming each broken link."""
import html.parser, os, sys, urllib.parse

root = sys.argv[1]

class Page(html.parser.HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.ids = [], set()
    def handle_starttag(self, tag, attrs):
        for k, v in attrs:
            if k == "id" and v:
                self.ids.add(v)
            if k in ("href", "src") and v:
                self.links.append(v)

pages = {}
for d, _, files in os.walk(root):
    for f in files:
        if f.endswith(".html"):
            p = Page()
            with open(os.path.join(d, f), encoding="utf-8") as fh:
                p.feed(fh.read())
            pages[os.path.normpath(os.path.join(d, f))] = p

broken = []
for path, page in sorted(pages.items()):
    if path.endswith("print.html") or path.endswith("404.html"):
        continue  # mdBook's own: every page in one, and the not-found page (absolute links)
    for link in page.links:
        u = urllib.parse.urlparse(link)
        if u.scheme or link.startswith("//") or link.startswith("mailto:"):
            continue
        target = os.path.normpath(os.path.join(os.path.dirname(path), urllib.parse.unquote(u.path))) if u.path else path
        if not os.path.exists(target):
            broken.append(f"{os.path.relpath(path, root)}: {link} (no such file)")
        elif u.fragment and target.endswith(".html") and u.fragment not in pages[target].ids:
            broken.append(f"{os.path.relpath(path, root)}: {link} (no such heading)")
if broken:
    print("broken links in the book:\n" + "\n".join(broken))
    sys.exit(1)
print(f"{len(pages)} pages, every relative link leads somewhere")
