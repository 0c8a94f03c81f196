// Secrets and registries: where each value comes from, never its text in errors.
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

// ---------------------------------------------------------------------------
// Secrets and registry credentials. Their values are read here, once, and
// no message ever quotes one: a value written in the job file by mistake is
// refused without being echoed.

// What a node is, without quoting a scalar (it may be a secret).
std::string ShapeName(const YAML::Node& n) {
  return n.IsScalar() ? "a string" : TypeName(n);
}

// `{file: PATH}` or `{env: VARIABLE}` (and for a secret, `as_env:`).
struct SecretSourceDraft {
  std::vector<Entry> kinds;  // file, env as written
  bool as_env = true;
  std::string source;  // "file PATH", "env VARIABLE"
  std::string value;
  bool read = false;  // `value` was read (or, with kSkip, the source is well-formed)
};

void ReadSecretFile(const Entry& e, SecretSourceDraft& d) {
  d.kinds.push_back(e);
  if (d.kinds.size() > 1) return;  // both given: an error, reported once
  std::optional<std::string> written = ReadNonEmpty(e, "a path");
  if (!written) return;
  std::optional<std::string> path = ExpandPath(e, *written);
  if (!path) return;
  d.source = "file " + *written;
  if (!e.src->read_secrets) {
    d.read = true;
    return;
  }
  // A regular file only: a FIFO or a device (/dev/stdin) could block or
  // never end.
  struct stat st;
  if (stat(path->c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {
    e.Error(QuoteValue(*written) + " is not a regular file");
    return;
  }
  std::string text, why;
  if (!ReadFileCapped(*path, &text, &why)) {
    e.Error("cannot read " + QuoteValue(*written) + ": " + why);
    return;
  }
  if (text.size() > kMaxJobFileBytes) {
    e.Error(QuoteValue(*written) + " is larger than 1 MiB; a secret is small (ship big files with 'files:')");
    return;
  }
  if (text.empty()) {
    e.Error(QuoteValue(*written) + " is empty");
    return;
  }
  d.value = std::move(text);
  d.read = true;
}

void ReadSecretEnv(const Entry& e, SecretSourceDraft& d) {
  d.kinds.push_back(e);
  if (d.kinds.size() > 1) return;  // both given: an error, reported once
  std::optional<std::string> name = ReadChecked(e, CheckEnvName);
  if (!name) return;
  d.source = "env " + *name;
  if (!e.src->read_secrets) {
    d.read = true;
    return;
  }
  const char* value = std::getenv(name->c_str());
  if (value == nullptr) {
    e.Error("environment variable " + *name + " is not set (barge reads it when it validates the job file)");
    return;
  }
  if (*value == '\0') {
    e.Error("environment variable " + *name + " is empty");
    return;
  }
  d.value = value;
  d.read = true;
}


constexpr KeyRule<SecretSourceDraft> kSecretRules[] = {
    {"file",
     {.type = KeyType::kString, .description = "Local file holding the value"}, ReadSecretFile},
    {"env",
     {.type = KeyType::kString, .description = "barge's environment variable holding the value"}, ReadSecretEnv},
    {"as_env",
     {.type = KeyType::kBoolean, .description = "Also give it as the environment variable NAME (else only /run/secrets/NAME)", .default_value = "true"},
     [](const Entry& e, SecretSourceDraft& d) {
       if (auto v = ReadEnum(e, kBooleans)) d.as_env = *v == "true";
     }},
};
std::vector<KeyInfo> SecretKeys() { return Describe(kSecretRules); }

constexpr KeyRule<SecretSourceDraft> kPasswordRules[] = {
    {"file",
     {.type = KeyType::kString, .description = "Local file holding the password"}, ReadSecretFile},
    {"env",
     {.type = KeyType::kString, .description = "barge's environment variable holding the password"}, ReadSecretEnv},
    {"as_env", {}, nullptr, "only a secret goes into the environment; the password goes to docker login alone"},
};
std::vector<KeyInfo> PasswordKeys() { return Describe(kPasswordRules); }

constexpr KeyRule<SecretSourceDraft> kValueRules[] = {
    {"file",
     {.type = KeyType::kString, .description = "Local file holding the value"}, ReadSecretFile},
    {"env",
     {.type = KeyType::kString, .description = "barge's environment variable holding the value"}, ReadSecretEnv},
};
std::vector<KeyInfo> SecretValueKeys() { return Describe(kValueRules); }

// Reads `e` through `rules`; false after an error. `what` names the value
// in messages ("a secret's value", "the password").
template <size_t N>
bool ReadSecretSource(const Entry& e, const KeyRule<SecretSourceDraft> (&rules)[N],
                      std::string_view what, SecretSourceDraft& d) {
  if (!e.value.IsMap()) {
    std::string message = "expected {file: PATH} or {env: VARIABLE}, got " + ShapeName(e.value);
    if (e.value.IsScalar()) message += "; " + std::string(what) + " is never written in the job file";
    e.Error(message);
    return false;
  }
  const size_t errors_before = e.src->errors->size();
  ReadMapping(e, rules, d);
  if (d.kinds.size() > 1) {
    d.kinds[1].KeyError("give one of file or env, not both");
    return false;
  }
  if (d.kinds.empty()) {
    if (e.src->errors->size() == errors_before) {
      e.KeyError("give file: PATH or env: VARIABLE (where " + std::string(what) + " is read from)");
    }
    return false;
  }
  return d.read && e.src->errors->size() == errors_before;
}

void ReadSecrets(const Entry& e, JobDraft& d) {
  if (e.value.IsNull()) return;
  if (!e.value.IsMap()) {
    e.Error("expected a mapping of NAME: {file: PATH} or {env: VARIABLE}, got " + ShapeName(e.value));
    return;
  }
  for (auto it = e.value.begin(); it != e.value.end(); ++it) {
    if (!it->first.IsScalar()) {
      e.src->Error(it->first.Mark(), e.path, "a secret's name must be a plain word, not " + TypeName(it->first));
      continue;
    }
    Entry item = e.Child(it->first, it->second);
    const std::string& name = it->first.Scalar();
    if (Status s = CheckEnvName(name); !s.ok()) {
      item.KeyError("invalid secret name " + QuoteValue(name) +
                    " (it names an environment variable and a file: letters, digits and '_', not "
                    "starting with a digit)");
      continue;
    }
    if (name.size() > 255) {
      item.KeyError("a secret's name is at most 255 characters (it names a file)");
      continue;
    }
    if (item.value.IsNull()) {
      item.Error("missing value (expected {file: PATH} or {env: VARIABLE})");
      continue;
    }
    SecretSourceDraft source;
    if (!ReadSecretSource(item, kSecretRules, "a secret's value", source)) continue;
    SecretSpec secret{name, source.source, source.as_env, std::move(source.value)};
    if (secret.as_env && !secret.value.empty()) {
      const std::string env = EnvValueOf(secret);
      const std::string fix = "; add 'as_env: false' to give it only as the file /run/secrets/" + name;
      if (env.empty()) {
        item.KeyError("the value holds nothing but line breaks");
        continue;
      }
      if (env.find_first_of("\n\r") != std::string::npos) {
        item.KeyError("the value holds a line break, which an environment variable given with "
                      "docker run --env-file cannot" + fix);
        continue;
      }
      if (env.find('\0') != std::string::npos) {
        item.KeyError("the value holds a NUL byte, which no environment variable can" + fix);
        continue;
      }
      if (FindInvalidUtf8(env) != std::string_view::npos) {
        item.KeyError("the value is not valid UTF-8, which Docker refuses in the environment" + fix);
        continue;
      }
    }
    d.spec.secrets.push_back(std::move(secret));
    d.secret_keys.push_back(item);
  }
}

// A registry as `docker login` takes it: a host name with an optional port
// and path, or a URL ("https://index.docker.io/v1/").
Status CheckRegistryServer(std::string_view server) {
  bool ok = !server.empty() && server.size() <= 255 && server[0] != '-' && server[0] != '/';
  for (char c : server) {
    ok = ok && ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                std::string_view("._-:/[]").find(c) != std::string_view::npos);
  }
  if (!ok) {
    return Status::Error("invalid registry server " + QuoteValue(server) +
                         " (expected a host name with an optional port and path, e.g. "
                         "ghcr.io or registry.example.com:5000)");
  }
  return Status::Ok();
}

std::optional<std::string> ReadSecretValue(const Entry& e, std::string_view what) {
  SecretSourceDraft source;
  if (!ReadSecretSource(e, kValueRules, what, source)) return std::nullopt;
  std::string value = std::move(source.value);
  while (!value.empty() && (value.back() == '\n' || value.back() == '\r')) value.pop_back();
  return value;
}

struct RegistryDraft {
  RegistrySpec registry;
  bool password_ok = false;
};

constexpr KeyRule<RegistryDraft> kRegistryRules[] = {
    {"server",
     {.type = KeyType::kString, .description = "Registry for docker login, e.g. ghcr.io", .required = true},
     [](const Entry& e, RegistryDraft& r) {
       if (auto s = ReadChecked(e, CheckRegistryServer)) r.registry.server = *s;
     }},
    {"username",
     {.type = KeyType::kString, .description = "User name for docker login", .required = true},
     [](const Entry& e, RegistryDraft& r) {
       std::optional<std::string> u = ReadNonEmpty(e, "a user name");
       if (!u) return;
       bool ok = u->size() <= 255;
       for (char c : *u) ok = ok && static_cast<unsigned char>(c) >= 0x20 && c != 0x7f;
       if (!ok) {
         e.Error("invalid user name " + QuoteValue(*u) + " (at most 255 characters, no control characters)");
         return;
       }
       r.registry.username = *u;
     }},
    {"password",
     {.type = KeyType::kBlock, .description = "Where the password is read from: {file: PATH} or {env: VARIABLE}", .keys = PasswordKeys, .required = true},
     [](const Entry& e, RegistryDraft& r) {
       SecretSourceDraft source;
       if (!ReadSecretSource(e, kPasswordRules, "the password", source)) return;
       std::string password = std::move(source.value);
       while (!password.empty() && (password.back() == '\n' || password.back() == '\r')) {
         password.pop_back();
       }
       if (e.src->read_secrets && password.empty()) {
         e.Error("the password holds nothing but line breaks");
         return;
       }
       if (password.find_first_of("\n\r") != std::string::npos) {
         e.Error("the password holds a line break (docker login --password-stdin takes one line)");
         return;
       }
       r.registry.password_source = source.source;
       r.registry.password = std::move(password);
       r.password_ok = true;
     }},
};
std::vector<KeyInfo> RegistryKeys() { return Describe(kRegistryRules); }

void ReadRegistry(const Entry& e, JobDraft& d) {
  if (!e.value.IsMap()) {
    e.Error("expected a mapping with server, username and password, got " + ShapeName(e.value));
    return;
  }
  RegistryDraft r;
  const size_t errors_before = e.src->errors->size();
  SeenKeys seen = ReadMapping(e, kRegistryRules, r);
  for (std::string_view key : {"server", "username", "password"}) {
    if (!seen.contains(std::string(key))) {
      e.KeyError("missing '" + std::string(key) + "'" +
                 (key == "password" ? " ({file: PATH} or {env: VARIABLE})" : ""));
    }
  }
  if (e.src->errors->size() == errors_before && r.password_ok) d.spec.registry = r.registry;
}

// A secret given as an environment variable must not also be set by a
// container block: the container would get only one of the two.
void CheckSecretsAgainstEnv(const JobDraft& d) {
  std::vector<std::pair<std::string, const ContainerOptions*>> blocks = {
      {"container.env", &d.spec.container}};
  if (d.head.present) blocks.push_back({"roles.head.container.env", &d.head.role.container});
  if (d.worker.present) blocks.push_back({"roles.worker.container.env", &d.worker.role.container});
  for (size_t i = 0; i < d.hosts.size(); ++i) {
    blocks.push_back({"hosts[" + std::to_string(i) + "].container.env", &d.hosts[i].host.container});
  }
  for (size_t i = 0; i < d.spares.size(); ++i) {
    blocks.push_back({"spare_hosts[" + std::to_string(i) + "].container.env", &d.spares[i].host.container});
  }
  for (size_t i = 0; i < d.spec.secrets.size(); ++i) {
    const SecretSpec& secret = d.spec.secrets[i];
    if (!secret.as_env) continue;
    for (const auto& [where, options] : blocks) {
      if (!options->env) continue;
      for (const auto& [key, value] : *options->env) {
        if (key != secret.name) continue;
        d.secret_keys[i].KeyError("also set in " + where +
                                  "; the container would get only one of the two (remove one, or "
                                  "add 'as_env: false' to the secret)");
      }
    }
  }
}

}  // namespace barge::runner::jobfile
