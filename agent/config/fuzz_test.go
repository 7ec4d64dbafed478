package config

import (
	"testing"
)

// Config decode, then validate: no panic on any file, and what validates
// yields sane derived values (thresholds parse, sizes positive).
func FuzzConfig(f *testing.F) {
	f.Add([]byte(header + "maxPods: 110\nevictionHard:\n  memory.available: 100Mi\n"))
	f.Add([]byte(header + "evictionHard:\n  memory.available: NaN%\n"))
	f.Add([]byte(header + "evictionSoft:\n  nodefs.available: 10%\nevictionSoftGracePeriod:\n  nodefs.available: 1m\n"))
	f.Add([]byte(header + "kubeReserved:\n  memory: 1e19\ncontainerLogMaxSize: 1e30\n"))
	f.Add([]byte(header + "cpuCFSQuotaPeriod: 100ms\nsystemReserved: {cpu: 500m, pid: \"1000\"}\n"))
	f.Add([]byte("apiVersion: v1\nkind: Pod\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := Defaults()
		if err := cfg.decode(data); err != nil {
			return
		}
		if err := cfg.Validate(); err != nil {
			return
		}
		if _, err := cfg.EvictionThresholds(); err != nil {
			t.Fatalf("valid config, thresholds refused: %v", err)
		}
		if cfg.LogMaxSize() < 1024 || cfg.MaxPods <= 0 {
			t.Fatalf("valid config with log size %d, maxPods %d", cfg.LogMaxSize(), cfg.MaxPods)
		}
		if _, err := cfg.HonouredFields(); err != nil {
			t.Fatal(err)
		}
	})
}
