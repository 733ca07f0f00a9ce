#ifndef GATTWAY_CCRYPTO_SHIM_H
#define GATTWAY_CCRYPTO_SHIM_H
// OpenSSL's libcrypto, for AES-CCM (BTHome and MiBeacon encryption). Only the EVP cipher API is used.
#include <openssl/evp.h>
#include <openssl/err.h>
#endif
