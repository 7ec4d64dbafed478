// Command probe-server is the test image's health endpoint for probe tests:
// HTTP, TCP and gRPC health on chosen ports, with health switchable while it
// runs, by HTTP call or by file.
//
// HTTP (on --http):
//
//	GET  /healthz              200 "ok" when healthy, 500 otherwise
//	POST /control/healthy      become healthy    (GET works too, for wget)
//	POST /control/unhealthy    become unhealthy
//	GET  /redirect?to=URL      302 to URL
//	GET  /delay?d=2s           answer after the given duration
//	GET  /headers              echo the request headers
//	GET  /record/NAME          remember NAME (lifecycle hooks call it)
//	GET  /records              the remembered names, one per line, in order
//
// TCP (on --tcp): accepts connections only while healthy.
// gRPC (on --grpc): grpc.health.v1.Health, SERVING or NOT_SERVING for every
// service name.
//
// Health is also false while the file named by --unhealthy-file exists.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	healthgrpc "google.golang.org/grpc/health/grpc_health_v1"
)

func main() {
	httpAddr := flag.String("http", ":8080", "HTTP listen address; empty disables")
	tcpAddr := flag.String("tcp", ":8081", "TCP listen address; empty disables")
	grpcAddr := flag.String("grpc", ":8082", "gRPC listen address; empty disables")
	unhealthyFile := flag.String("unhealthy-file", "/tmp/unhealthy", "while this file exists the server is unhealthy")
	startUnhealthy := flag.Bool("start-unhealthy", false, "start in the unhealthy state")
	startDelay := flag.Duration("start-delay", 0, "wait before listening (for startup probes)")
	flag.Parse()

	s := &server{unhealthyFile: *unhealthyFile}
	s.healthy.Store(!*startUnhealthy)
	time.Sleep(*startDelay)

	if *httpAddr != "" {
		go func() { log.Fatal(http.ListenAndServe(*httpAddr, s.httpHandler())) }()
	}
	if *tcpAddr != "" {
		go s.serveTCP(*tcpAddr)
	}
	if *grpcAddr != "" {
		lis, err := net.Listen("tcp", *grpcAddr)
		if err != nil {
			log.Fatalf("grpc listen %s: %v", *grpcAddr, err)
		}
		g := grpc.NewServer()
		healthgrpc.RegisterHealthServer(g, &grpcHealth{s: s})
		go func() { log.Fatal(g.Serve(lis)) }()
	}
	log.Printf("probe-server: http=%q tcp=%q grpc=%q healthy=%v", *httpAddr, *tcpAddr, *grpcAddr, s.isHealthy())

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, unix.SIGTERM, unix.SIGINT)
	<-stop
}

type server struct {
	healthy       atomic.Bool
	unhealthyFile string

	mu      sync.Mutex
	records []string
}

func (s *server) isHealthy() bool {
	if !s.healthy.Load() {
		return false
	}
	if s.unhealthyFile != "" {
		if _, err := os.Stat(s.unhealthyFile); err == nil {
			return false
		}
	}
	return true
}

func (s *server) httpHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		if s.isHealthy() {
			fmt.Fprintln(w, "ok")
			return
		}
		http.Error(w, "unhealthy", http.StatusInternalServerError)
	})
	mux.HandleFunc("/control/healthy", func(w http.ResponseWriter, r *http.Request) {
		s.healthy.Store(true)
		fmt.Fprintln(w, "healthy")
	})
	mux.HandleFunc("/control/unhealthy", func(w http.ResponseWriter, r *http.Request) {
		s.healthy.Store(false)
		fmt.Fprintln(w, "unhealthy")
	})
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		// Read first: an HTTP/1 server stops reading the request once
		// the response starts.
		body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, 16<<20))
		if err != nil {
			http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
			return
		}
		w.Write(body)
	})
	mux.HandleFunc("/redirect", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	})
	mux.HandleFunc("/delay", func(w http.ResponseWriter, r *http.Request) {
		d, err := time.ParseDuration(r.URL.Query().Get("d"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		time.Sleep(d)
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/record/", func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimPrefix(r.URL.Path, "/record/")
		s.mu.Lock()
		s.records = append(s.records, name)
		s.mu.Unlock()
		log.Printf("recorded %q from %s (%s)", name, r.RemoteAddr, r.UserAgent())
		fmt.Fprintln(w, "recorded", name)
	})
	mux.HandleFunc("/records", func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, name := range s.records {
			fmt.Fprintln(w, name)
		}
	})
	mux.HandleFunc("/headers", func(w http.ResponseWriter, r *http.Request) {
		names := make([]string, 0, len(r.Header))
		for k := range r.Header {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			for _, v := range r.Header[k] {
				fmt.Fprintf(w, "%s: %s\n", k, v)
			}
		}
	})
	return mux
}

// serveTCP keeps a listener open only while healthy, so a connect attempt
// fails with "connection refused" when unhealthy.
func (s *server) serveTCP(addr string) {
	var lis net.Listener
	for {
		switch healthy := s.isHealthy(); {
		case healthy && lis == nil:
			l, err := net.Listen("tcp", addr)
			if err != nil {
				log.Printf("tcp listen %s: %v", addr, err)
				break
			}
			lis = l
			go func(l net.Listener) {
				for {
					c, err := l.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}(l)
		case !healthy && lis != nil:
			lis.Close()
			lis = nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

type grpcHealth struct {
	healthgrpc.UnimplementedHealthServer
	s *server
}

func (g *grpcHealth) Check(context.Context, *healthgrpc.HealthCheckRequest) (*healthgrpc.HealthCheckResponse, error) {
	if g.s.isHealthy() {
		return &healthgrpc.HealthCheckResponse{Status: healthgrpc.HealthCheckResponse_SERVING}, nil
	}
	return &healthgrpc.HealthCheckResponse{Status: healthgrpc.HealthCheckResponse_NOT_SERVING}, nil
}
