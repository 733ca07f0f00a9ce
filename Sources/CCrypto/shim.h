#ifndef GATTWAY_CCRYPTO_SHIM_H
#define GATTWAY_CCRYPTO_SHIM_H
// OpenSSL's libcrypto: AES-CCM for BTHome and MiBeacon encryption (Parsers), and X25519,
// ChaCha20-Poly1305, SHA-256 and the random generator for the ESPHome API's Noise encryption
// (ESPHomeAPI). Only the EVP and RAND APIs are used.
#include <openssl/evp.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#endif
