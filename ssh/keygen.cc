#include "ssh/keygen.h"

#include <libssh/libssh.h>

#include <cstring>

namespace barge::ssh {

namespace {

// Owns a string libssh allocated; wipes it before freeing.
struct LibsshString {
  char* p = nullptr;
  ~LibsshString() {
    if (p == nullptr) return;
    explicit_bzero(p, std::strlen(p));
    ssh_string_free_char(p);
  }
};

struct Key {
  ssh_key k = nullptr;
  ~Key() { ssh_key_free(k); }
};

}  // namespace

Result<KeyPair> GenerateEd25519() {
  Key key;
  if (ssh_pki_generate(SSH_KEYTYPE_ED25519, 0, &key.k) != SSH_OK || key.k == nullptr) {
    return Status::Error("cannot generate an ed25519 key (libssh)");
  }
  LibsshString priv;
  LibsshString pub;
  if (ssh_pki_export_privkey_base64(key.k, nullptr, nullptr, nullptr, &priv.p) != SSH_OK ||
      priv.p == nullptr) {
    return Status::Error("cannot export a generated ed25519 key (libssh)");
  }
  if (ssh_pki_export_pubkey_base64(key.k, &pub.p) != SSH_OK || pub.p == nullptr) {
    return Status::Error("cannot export a generated ed25519 public key (libssh)");
  }
  KeyPair out;
  out.private_key = priv.p;
  if (out.private_key.empty() || out.private_key.back() != '\n') out.private_key += '\n';
  out.public_key = std::string("ssh-ed25519 ") + pub.p;
  return out;
}

}  // namespace barge::ssh
