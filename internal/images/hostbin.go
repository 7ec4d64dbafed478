package images

import (
	"debug/elf"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"strings"
)

// libDirs are where a dynamic binary's libraries are looked up, in the
// order of Debian's multiarch loader.
func libDirs() []string {
	triple := map[string]string{"amd64": "x86_64-linux-gnu", "arm64": "aarch64-linux-gnu"}[runtime.GOARCH]
	return []string{"/lib/" + triple, "/usr/lib/" + triple, "/lib64", "/usr/lib64", "/lib", "/usr/lib"}
}

// hostBinary is a host binary at dest in an image, with the loader and the
// shared libraries it needs (at their host paths) and their directories.
func hostBinary(src, dest string) ([]file, error) {
	files := append(dirs(path.Dir(dest)), file{Path: dest, Mode: 0o755, Source: src})
	seen := map[string]bool{}
	var walk func(bin string) error
	walk = func(bin string) error {
		f, err := elf.Open(bin)
		if err != nil {
			return fmt.Errorf("%s: %w", bin, err)
		}
		defer f.Close()
		var deps []string
		for _, p := range f.Progs {
			if p.Type != elf.PT_INTERP {
				continue
			}
			b := make([]byte, p.Filesz)
			if _, err := p.ReadAt(b, 0); err != nil {
				return fmt.Errorf("%s: interpreter: %w", bin, err)
			}
			deps = append(deps, strings.TrimRight(string(b), "\x00"))
		}
		needed, err := f.ImportedLibraries()
		if err != nil {
			return fmt.Errorf("%s: %w", bin, err)
		}
		for _, lib := range needed {
			found := ""
			for _, d := range libDirs() {
				if _, err := os.Stat(filepath.Join(d, lib)); err == nil {
					found = filepath.Join(d, lib)
					break
				}
			}
			if found == "" {
				return fmt.Errorf("%s needs %s, found in none of %v", bin, lib, libDirs())
			}
			deps = append(deps, found)
		}
		for _, d := range deps {
			if seen[d] {
				continue
			}
			seen[d] = true
			rel := strings.TrimPrefix(d, "/")
			files = append(files, dirs(path.Dir(rel))...)
			files = append(files, file{Path: rel, Mode: 0o755, Source: d})
			if err := walk(d); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(src); err != nil {
		return nil, err
	}
	return dedupDirs(files), nil
}

// dedupDirs drops repeated directory entries, keeping the first.
func dedupDirs(files []file) []file {
	seen := map[string]bool{}
	out := files[:0]
	for _, f := range files {
		if f.Dir {
			if seen[f.Path] {
				continue
			}
			seen[f.Path] = true
		}
		out = append(out, f)
	}
	return out
}
