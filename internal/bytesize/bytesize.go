// Package bytesize prints byte counts for people, in binary units: what
// nodectl's tables and the agent's messages show.
package bytesize

import "fmt"

// Binary is b in the largest binary unit under it, one decimal: "512B",
// "72.3Mi", "2.6Gi".
func Binary(b uint64) string {
	units := []string{"B", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	v, i := float64(b), 0
	for v >= 1024 && i < len(units)-1 {
		v, i = v/1024, i+1
	}
	if i == 0 {
		return fmt.Sprintf("%d%s", b, units[0])
	}
	return fmt.Sprintf("%.1f%s", v, units[i])
}
