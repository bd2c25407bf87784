/* Test helper: self-signed certificates made on the spot (OpenSSL), for TLS servers in tests. */
#pragma once

/* A self-signed CA certificate and its P-256 key, PEM, valid from an hour ago for an hour; subject CN cn;
 * san a subjectAltName value in OpenSSL's notation ("DNS:a.example,IP:127.0.0.1") or NULL for none. Both
 * strings are the caller's to free. Fails the running test on error. */
void tls_test_cert(const char *cn, const char *san, char **ret_cert, char **ret_key);
/* The same with a 2048-bit RSA key (what SNS signs with) and no subjectAltName. */
void tls_test_cert_rsa(const char *cn, char **ret_cert, char **ret_key);
