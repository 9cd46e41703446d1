package docs_test

import (
	"bufio"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

// block is one fenced ```sh block of a Markdown file.
type block struct {
	file    string
	line    int    // of the opening fence
	section string // the nearest heading above it
	script  string
	skip    string // the reason of a doc-test skip marker, or ""
}

var skipMarker = regexp.MustCompile(`^<!--\s*doc-test:\s*skip:\s*(.*?)\s*-->$`)

// shellBlocks returns the ```sh blocks of a Markdown document; blocks in
// other languages are skipped over.
func shellBlocks(file, text string) ([]block, error) {
	var (
		blocks  []block
		section string
		prev    string // the last non-blank line before a fence
		cur     *block // the open block; nil outside blocks
		keep    bool   // whether the open block is a ```sh block
	)
	sc := bufio.NewScanner(strings.NewReader(text))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur != nil {
			switch {
			case trimmed == "```":
				if keep {
					blocks = append(blocks, *cur)
				}
				cur = nil
			case keep:
				cur.script += line + "\n"
			}
			continue
		}
		switch {
		case strings.HasPrefix(trimmed, "```"):
			cur = &block{file: file, line: n, section: section}
			keep = strings.TrimPrefix(trimmed, "```") == "sh"
			if m := skipMarker.FindStringSubmatch(prev); keep && m != nil {
				if m[1] == "" {
					return nil, fmt.Errorf("%s:%d: a doc-test skip marker needs a reason", file, n-1)
				}
				cur.skip = m[1]
			}
		case strings.HasPrefix(trimmed, "#"):
			section = strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
		}
		if trimmed != "" {
			prev = trimmed
		}
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: unclosed code block", file, cur.line)
	}
	return blocks, nil
}

func TestShellBlocksAreTheShellBlocksWithTheirSectionAndSkipReason(t *testing.T) {
	doc := "# A\n\n```sh\necho one\n```\n\n## B\n<!-- doc-test: skip: no registry here -->\n```sh\ncrane push x\n```\n\n```yaml\nkey: value\n```\n```sh\necho two\necho three\n```\n"
	got, err := shellBlocks("x.md", doc)
	if err != nil {
		t.Fatal(err)
	}
	want := []block{
		{file: "x.md", line: 3, section: "A", script: "echo one\n"},
		{file: "x.md", line: 9, section: "B", script: "crane push x\n", skip: "no registry here"},
		{file: "x.md", line: 16, section: "B", script: "echo two\necho three\n"},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("got\n%+v\nwant\n%+v", got, want)
	}
	if _, err := shellBlocks("x.md", "<!-- doc-test: skip: -->\n```sh\nx\n```\n"); err == nil {
		t.Error("a skip marker without a reason was accepted")
	}
	if _, err := shellBlocks("x.md", "```sh\nx\n"); err == nil {
		t.Error("an unclosed block was accepted")
	}
}
