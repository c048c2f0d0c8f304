package rlock_test

import (
	"go/ast"
	"go/doc"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docSkips are the directories whose packages are not public API: what
// pkg.go.dev shows of them does not matter.
var docSkips = map[string]bool{"internal": true, "cmd": true, "benchmarks": true, "testdata": true}

// TestDocPublicPackages checks what pkg.go.dev shows of every public
// package (each directory outside internal/, cmd/ and benchmarks/, the
// extra modules included): an overview (a package comment go doc finds),
// at least one runnable example with an "// Output:" comment, and no
// example whose name attaches it to nothing (an Example named after an
// identifier that was renamed or moved is shown nowhere).
func TestDocPublicPackages(t *testing.T) {
	var dirs []string
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != "." && (docSkips[d.Name()] || strings.HasPrefix(d.Name(), ".") || strings.HasPrefix(d.Name(), "_")) {
			return filepath.SkipDir
		}
		if m, _ := filepath.Glob(filepath.Join(p, "*.go")); len(m) > 0 {
			dirs = append(dirs, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(dirs) < 8 {
		t.Fatalf("found only %d public packages (%v): the walk is broken", len(dirs), dirs)
	}
	for _, dir := range dirs {
		t.Run(filepath.ToSlash(dir), func(t *testing.T) { checkPackageDoc(t, dir) })
	}
}

func checkPackageDoc(t *testing.T, dir string) {
	fset := token.NewFileSet()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files, tests []*ast.File
	for _, e := range entries {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(name, "_test.go") {
			tests = append(tests, f)
		} else {
			files = append(files, f)
		}
	}
	pkg, err := doc.NewFromFiles(fset, append(files, tests...), "example.com/"+filepath.ToSlash(dir))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(pkg.Doc) == "" {
		t.Errorf("package %s has no overview: no package comment (or a blank line between it and the package clause)", pkg.Name)
	}
	attached := map[string]*doc.Example{}
	add := func(exs []*doc.Example) {
		for _, ex := range exs {
			attached[ex.Name] = ex
		}
	}
	add(pkg.Examples)
	for _, f := range pkg.Funcs {
		add(f.Examples)
	}
	for _, ty := range pkg.Types {
		add(ty.Examples)
		for _, f := range ty.Funcs {
			add(f.Examples)
		}
		for _, m := range ty.Methods {
			add(m.Examples)
		}
	}
	withOutput := 0
	for _, ex := range doc.Examples(tests...) {
		name := "Example" + ex.Name
		if _, ok := attached[ex.Name]; !ok {
			t.Errorf("%s: %s is attached to nothing: no exported identifier of package %s is named %q", dir, name, pkg.Name, strings.SplitN(ex.Name, "_", 2)[0])
		}
		if ex.Output != "" || ex.EmptyOutput {
			withOutput++
		}
	}
	if withOutput == 0 {
		t.Errorf("package %s has no runnable example with an // Output: comment", pkg.Name)
	}
}
