"""Copy the per-area usage docs (docs/*.md, real command output) into README.md between the
`<!-- docs:begin -->` / `<!-- docs:end -->` markers, headings demoted to sit under "## Commands".
Run after changing a doc: python docs/build_readme.py"""

import os
import re

HERE = os.path.dirname(os.path.abspath(__file__))
README = os.path.join(os.path.dirname(HERE), "README.md")
ORDER = ["commitlog.md", "cq-and-index.md", "verify-and-recover.md", "rebuild.md", "rocketmq5.md", "spark.md"]
BEGIN, END = "<!-- docs:begin -->", "<!-- docs:end -->"


def demote(text: str) -> str:
    out, fence = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            fence = not fence
        if not fence and re.match(r"^#{1,5} ", line):
            line = "##" + line
        out.append(line)
    return "\n".join(out).strip() + "\n"


def main() -> None:
    parts = [f"<!-- from docs/{name} -->\n" + demote(open(os.path.join(HERE, name), encoding="utf-8").read())
             for name in ORDER if os.path.exists(os.path.join(HERE, name))]
    readme = open(README, encoding="utf-8").read()
    a, b = readme.index(BEGIN) + len(BEGIN), readme.index(END)
    readme = readme[:a] + "\n" + "\n".join(parts) + readme[b:]
    with open(README, "w", encoding="utf-8") as f:
        f.write(readme)


if __name__ == "__main__":
    main()
