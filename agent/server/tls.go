package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"nodeagent/internal/safefile"
)

// SelfSignedValidity is how long a self-signed serving certificate lasts;
// one that expires within a tenth of it is made anew at start.
const SelfSignedValidity = 365 * 24 * time.Hour

// SelfSigned returns the paths of a self-signed serving certificate for
// host and ips under dir (kubelet.crt and kubelet.key, as the kubelet's
// cert dir holds them), made when missing, unreadable, near expiry, not
// for these names, or itself a CA (as an older agent made it). As the
// kubelet's (client-go's GenerateSelfSignedCertKey): a leaf for server
// authentication, signed by a CA made for it alone whose key is dropped
// at once, so nothing can sign with it again; kubelet.crt holds the leaf
// then the CA.
func SelfSigned(dir, host string, ips []net.IP, now time.Time) (certFile, keyFile string, err error) {
	certFile, keyFile = filepath.Join(dir, "kubelet.crt"), filepath.Join(dir, "kubelet.key")
	if pair, err := tls.LoadX509KeyPair(certFile, keyFile); err == nil && pair.Leaf != nil {
		leaf := pair.Leaf
		if !leaf.IsCA && now.Add(SelfSignedValidity/10).Before(leaf.NotAfter) && leaf.VerifyHostname(host) == nil && coversIPs(leaf, ips) {
			return certFile, keyFile, nil
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", "", err
	}
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	serials := make([]*big.Int, 2)
	for i := range serials {
		if serials[i], err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)); err != nil {
			return "", "", err
		}
		serials[i].Add(serials[i], big.NewInt(1))
	}
	ca := &x509.Certificate{
		SerialNumber:          serials[0],
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s-ca@%d", host, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(SelfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, caKey.Public(), caKey)
	if err != nil {
		return "", "", err
	}
	if ca, err = x509.ParseCertificate(caDER); err != nil {
		return "", "", err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	leaf := &x509.Certificate{
		SerialNumber:          serials[1],
		Subject:               pkix.Name{CommonName: fmt.Sprintf("%s@%d", host, now.Unix())},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(SelfSignedValidity),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		DNSNames:              []string{host, "localhost"},
		IPAddresses:           append([]net.IP{net.IPv4(127, 0, 0, 1)}, ips...),
	}
	der, err := x509.CreateCertificate(rand.Reader, leaf, ca, key.Public(), caKey)
	if err != nil {
		return "", "", err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return "", "", err
	}
	if err := safefile.Write(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), 0o600); err != nil {
		return "", "", err
	}
	chain := append(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})...)
	if err := safefile.Write(certFile, chain, 0o644); err != nil {
		return "", "", err
	}
	return certFile, keyFile, nil
}

func coversIPs(c *x509.Certificate, ips []net.IP) bool {
	for _, ip := range ips {
		found := false
		for _, have := range c.IPAddresses {
			found = found || have.Equal(ip)
		}
		if !found {
			return false
		}
	}
	return true
}

// certReloader serves the key pair in two files and loads it again when
// either changes: a certificate renewed on disk (by an operator, or by
// serving-certificate rotation) is served without a restart.
type certReloader struct {
	certFile, keyFile string

	mu     sync.Mutex
	cert   *tls.Certificate
	stamps [2]time.Time
}

func (c *certReloader) stamp() ([2]time.Time, error) {
	var s [2]time.Time
	for i, f := range []string{c.certFile, c.keyFile} {
		info, err := os.Stat(f)
		if err != nil {
			return s, err
		}
		s[i] = info.ModTime()
	}
	return s, nil
}

func (c *certReloader) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s, err := c.stamp()
	if err == nil && (c.cert == nil || s != c.stamps) {
		pair, lerr := tls.LoadX509KeyPair(c.certFile, c.keyFile)
		if lerr == nil {
			c.cert, c.stamps = &pair, s
		} else if c.cert == nil {
			return nil, fmt.Errorf("serving certificate %s: %w", c.certFile, lerr)
		}
	}
	if c.cert == nil {
		return nil, fmt.Errorf("serving certificate %s: %w", c.certFile, err)
	}
	return c.cert, nil
}

// FileCertificate serves the key pair in certFile and keyFile (checked
// now, reloaded when they change) to TLSConfig.
func FileCertificate(certFile, keyFile string) (func(*tls.ClientHelloInfo) (*tls.Certificate, error), error) {
	r := &certReloader{certFile: certFile, keyFile: keyFile}
	if _, err := r.get(nil); err != nil {
		return nil, err
	}
	return r.get, nil
}

// TLSConfig is the kubelet server's TLS: the certificate get gives, the
// configured minimum version, cipher suites and key exchange curves, and
// client certificates asked for but verified by the Authenticator (a
// request without one may still bring a token).
func TLSConfig(get func(*tls.ClientHelloInfo) (*tls.Certificate, error), minVersion uint16, ciphers []uint16, curves []tls.CurveID) *tls.Config {
	return &tls.Config{
		GetCertificate:   get,
		MinVersion:       minVersion,
		CipherSuites:     ciphers,
		CurvePreferences: curves,
		ClientAuth:       tls.RequestClientCert,
		NextProtos:       []string{"h2", "http/1.1"},
	}
}

// ClientCAs serves the PEM bundle of client CAs in file
// (authentication.x509.clientCAFile), read now and again whenever the
// file changes, as the kubelet reloads it. A bundle that no longer reads
// leaves the last good one in use.
func ClientCAs(file string) (func() *x509.CertPool, error) {
	r := &caReloader{file: file}
	if err := r.load(); err != nil {
		return nil, err
	}
	return r.get, nil
}

type caReloader struct {
	file string

	mu    sync.Mutex
	pool  *x509.CertPool
	stamp time.Time
}

func (r *caReloader) load() error {
	info, err := os.Stat(r.file)
	if err != nil {
		return fmt.Errorf("authentication.x509.clientCAFile %s: %w", r.file, err)
	}
	if r.pool != nil && info.ModTime().Equal(r.stamp) {
		return nil
	}
	data, err := safefile.Read(r.file, 4<<20)
	if err != nil {
		return fmt.Errorf("authentication.x509.clientCAFile %s: %w", r.file, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("authentication.x509.clientCAFile %s: no PEM certificate in it", r.file)
	}
	r.pool, r.stamp = pool, info.ModTime()
	return nil
}

func (r *caReloader) get() *x509.CertPool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.load() // on error the last good bundle stays
	return r.pool
}
