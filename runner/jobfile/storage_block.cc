// `storage:` — the object store of s3:// destinations (job_spec.h's
// StorageSpec), and the s3:// destinations themselves.
#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "base/user_home.h"
#include "runner/jobfile/blocks.h"

namespace barge::runner::jobfile {

namespace {

inline constexpr std::string_view kAddressing[] = {"virtual", "path"};

Status CheckEndpoint(std::string_view url) {
  const bool scheme = url.starts_with("http://") || url.starts_with("https://");
  const size_t host = url.find("//") + 2;
  const bool clean = std::none_of(url.begin(), url.end(), [](char c) {
    return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f || c == '?' || c == '#' || c == '@';
  });
  const bool no_path = url.find('/', host) == std::string_view::npos || url.find('/', host) == url.size() - 1;
  if (scheme && clean && no_path && url.size() > host && url.size() <= 500) return Status::Ok();
  return Status::Error("expected an http:// or https:// URL with a host and no path (e.g. "
                       "https://s3.eu-west-1.amazonaws.com or http://127.0.0.1:9000), got " + QuoteValue(url));
}

Status CheckRegion(std::string_view region) {
  const bool ok = !region.empty() && region.size() <= 64 && std::all_of(region.begin(), region.end(), [](char c) {
    return std::islower(static_cast<unsigned char>(c)) || std::isdigit(static_cast<unsigned char>(c)) || c == '-';
  });
  if (ok) return Status::Ok();
  return Status::Error("expected a region name (lowercase letters, digits and '-', e.g. us-east-1 or auto), got " +
                       QuoteValue(region));
}

// Bytes of a size as IsSize accepts it (binary units: 1k = 1024).
uint64_t SizeInBytes(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && (std::isdigit(static_cast<unsigned char>(text[digits])) || text[digits] == '.')) {
    ++digits;
  }
  const double number = std::strtod(std::string(text.substr(0, digits)).c_str(), nullptr);
  while (digits < text.size() && text[digits] == ' ') ++digits;
  const char unit = digits < text.size() ? static_cast<char>(std::tolower(text[digits])) : 'b';
  const std::string_view units = "bkmgtp";
  const size_t power = units.find(unit) == std::string_view::npos ? 0 : units.find(unit);
  double bytes = number;
  for (size_t i = 0; i < power; ++i) bytes *= 1024;
  return static_cast<uint64_t>(bytes);
}

// The keys of `profile` in an AWS shared credentials file (INI: [NAME],
// then "key = value" lines).
std::map<std::string, std::string> ProfileKeys(std::istream& in, std::string_view profile) {
  std::map<std::string, std::string> keys;
  std::string line;
  bool inside = false;
  auto trim = [](std::string s) {
    s.erase(0, s.find_first_not_of(" \t\r"));
    s.erase(s.find_last_not_of(" \t\r") + 1);
    return s;
  };
  while (std::getline(in, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#' || line[0] == ';') continue;
    if (line[0] == '[') {
      inside = line == "[" + std::string(profile) + "]";
      continue;
    }
    const size_t eq = line.find('=');
    if (inside && eq != std::string::npos) keys[trim(line.substr(0, eq))] = trim(line.substr(eq + 1));
  }
  return keys;
}

struct StorageDraft {
  StorageSpec storage;
  bool has_access_key = false, has_secret_key = false;
  std::optional<Entry> profile_entry;
  std::string credentials_file;  // "" = AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials
};

void ReadKey(const Entry& e, std::string_view what, std::string& out, bool& seen) {
  std::optional<std::string> v = ReadSecretValue(e, what);
  if (!v) return;
  if (e.src->read_secrets && v->empty()) {
    e.Error(std::string(what) + " is empty");
    return;
  }
  out = *v;
  seen = true;
}

constexpr KeyRule<StorageDraft> kStorageRules[] = {
    {"endpoint",
     {.type = KeyType::kString, .description = "The S3 endpoint's URL: AWS (the default, https://s3.REGION.amazonaws.com), MinIO, Ceph RGW, R2, GCS (https://storage.googleapis.com)"},
     [](const Entry& e, StorageDraft& d) {
       if (auto url = ReadChecked(e, CheckEndpoint)) {
         d.storage.endpoint = *url;
         while (d.storage.endpoint.back() == '/') d.storage.endpoint.pop_back();
       }
     }},
    {"region",
     {.type = KeyType::kString, .description = "The region requests are signed for (R2: auto)", .default_value = "us-east-1"},
     [](const Entry& e, StorageDraft& d) {
       if (auto r = ReadChecked(e, CheckRegion)) d.storage.region = *r;
     }},
    {"addressing",
     {.type = KeyType::kEnum, .description = "virtual: https://BUCKET.host/KEY; path: https://host/BUCKET/KEY (most self-hosted servers)", .default_value = "virtual", .choices = kAddressing},
     [](const Entry& e, StorageDraft& d) {
       if (auto v = ReadEnum(e, kAddressing)) d.storage.path_style = *v == "path";
     }},
    {"access_key",
     {.type = KeyType::kBlock, .description = "The access key id: {file: PATH} or {env: VARIABLE}", .keys = SecretValueKeys},
     [](const Entry& e, StorageDraft& d) { ReadKey(e, "the access key", d.storage.access_key, d.has_access_key); }},
    {"secret_key",
     {.type = KeyType::kBlock, .description = "The secret access key: {file: PATH} or {env: VARIABLE}", .keys = SecretValueKeys},
     [](const Entry& e, StorageDraft& d) { ReadKey(e, "the secret key", d.storage.secret_key, d.has_secret_key); }},
    {"session_token",
     {.type = KeyType::kBlock, .description = "A session token for temporary keys: {file: PATH} or {env: VARIABLE}", .keys = SecretValueKeys},
     [](const Entry& e, StorageDraft& d) {
       bool seen = false;
       ReadKey(e, "the session token", d.storage.session_token, seen);
     }},
    {"profile",
     {.type = KeyType::kString, .description = "A profile of the AWS shared credentials file (instead of access_key and secret_key)"},
     [](const Entry& e, StorageDraft& d) {
       if (auto p = ReadNonEmpty(e, "a profile name")) {
         d.storage.profile = *p;
         d.profile_entry = e;
       }
     }},
    {"credentials_file",
     {.type = KeyType::kString, .description = "The AWS shared credentials file a profile is read from (default: $AWS_SHARED_CREDENTIALS_FILE, else ~/.aws/credentials)"},
     [](const Entry& e, StorageDraft& d) {
       if (auto p = ReadPath(e)) d.credentials_file = *p;
     }},
    {"part_size",
     {.type = KeyType::kSize, .description = "Size of each part of a multipart upload (5m to 5g); also the size under which a file is sent in one PUT", .default_value = "16m"},
     [](const Entry& e, StorageDraft& d) {
       std::optional<std::string> s = ReadSize(e);
       if (!s) return;
       const uint64_t bytes = SizeInBytes(*s);
       if (bytes < (5ull << 20) || bytes > (5ull << 30)) {
         e.Error("expected a part size from 5m to 5g (S3's bounds), got " + QuoteValue(*s));
         return;
       }
       d.storage.part_size = bytes;
     }},
    {"parallel",
     {.type = KeyType::kInteger, .description = "Parts sent at once per file", .default_value = "4"},
     [](const Entry& e, StorageDraft& d) {
       if (auto n = ReadInteger(e, 1, 32)) d.storage.parallel = static_cast<int>(*n);
     }},
    {"logs",
     {.type = KeyType::kString, .description = "Where the kept logs go at the end of the job: s3://BUCKET/PREFIX ({job}, {name}, {host}, {rank})"},
     [](const Entry& e, StorageDraft& d) {
       if (auto to = ReadChecked(e, CheckS3Destination)) d.storage.logs = *to;
     }},
};

// The profile's keys, read from the shared credentials file, into `d`.
void ReadProfile(const Entry& at, StorageDraft& d) {
  if (!at.src->read_secrets) return;
  std::string path = d.credentials_file;
  if (path.empty()) {
    const char* env = std::getenv("AWS_SHARED_CREDENTIALS_FILE");
    path = env != nullptr && *env != '\0' ? env : UserHome() + "/.aws/credentials";
  }
  std::ifstream in(path);
  if (!in) {
    at.Error("cannot read the AWS shared credentials file " + QuoteValue(path));
    return;
  }
  std::map<std::string, std::string> keys = ProfileKeys(in, d.storage.profile);
  if (keys["aws_access_key_id"].empty() || keys["aws_secret_access_key"].empty()) {
    at.Error("profile " + QuoteValue(d.storage.profile) + " of " + QuoteValue(path) +
             " has no aws_access_key_id and aws_secret_access_key");
    return;
  }
  d.storage.access_key = keys["aws_access_key_id"];
  d.storage.secret_key = keys["aws_secret_access_key"];
  d.storage.session_token = keys["aws_session_token"];
}

}  // namespace

Status CheckS3Destination(std::string_view to) {
  auto bad = [&to](std::string_view why) {
    return Status::Error("expected s3://BUCKET/PREFIX (" + std::string(why) + "), got " + QuoteValue(to));
  };
  if (!to.starts_with("s3://")) return bad("only s3:// destinations");
  std::string_view rest = to.substr(5);
  const size_t slash = rest.find('/');
  const std::string_view bucket = rest.substr(0, slash);
  const bool bucket_ok = bucket.size() >= 3 && bucket.size() <= 63 &&
                         std::all_of(bucket.begin(), bucket.end(), [](char c) {
                           return std::islower(static_cast<unsigned char>(c)) ||
                                  std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '.';
                         }) &&
                         bucket.front() != '-' && bucket.front() != '.' && bucket.back() != '-' && bucket.back() != '.';
  if (!bucket_ok) return bad("a bucket name is 3 to 63 lowercase letters, digits, '.' and '-'");
  const std::string_view key = slash == std::string_view::npos ? std::string_view() : rest.substr(slash + 1);
  if (key.size() > 900) return bad("a prefix of at most 900 characters");
  for (size_t i = 0; i < key.size(); ++i) {
    const auto c = static_cast<unsigned char>(key[i]);
    if (c < 0x20 || c == 0x7f) return bad("no control characters");
    if (key[i] == '{') {
      const size_t end = key.find('}', i);
      const std::string_view name = end == std::string_view::npos ? key.substr(i) : key.substr(i, end - i + 1);
      if (name != "{job}" && name != "{name}" && name != "{rank}" && name != "{host}") {
        return bad("unknown placeholder " + QuoteValue(name) + "; the placeholders are {job}, {name}, {rank} and {host}");
      }
      i = end;
    }
  }
  return Status::Ok();
}

std::vector<KeyInfo> StorageKeys() { return Describe(kStorageRules); }

void ReadStorage(const Entry& e, JobDraft& d) {
  if (!e.value.IsMap()) {
    e.Error("expected a mapping (endpoint, region, addressing, credentials), got " + TypeName(e.value));
    return;
  }
  StorageDraft s;
  const size_t errors_before = e.src->errors->size();
  SeenKeys seen = ReadMapping(e, kStorageRules, s);
  const bool keys = seen.contains("access_key") || seen.contains("secret_key");
  if (keys && seen.contains("profile")) {
    e.KeyError("give access_key and secret_key, or profile, not both");
    return;
  }
  if (!keys && !seen.contains("profile")) {
    e.KeyError("missing credentials: give access_key and secret_key ({env: VARIABLE} or {file: PATH}), or "
               "profile (a profile of the AWS shared credentials file)");
    return;
  }
  if (keys && seen.contains("access_key") != seen.contains("secret_key")) {
    e.KeyError(std::string("missing ") + (seen.contains("access_key") ? "secret_key" : "access_key") +
               ": give both access_key and secret_key");
    return;
  }
  if (seen.contains("credentials_file") && !seen.contains("profile")) {
    e.KeyError("credentials_file is read only for a profile: add profile: NAME");
    return;
  }
  if (s.profile_entry) ReadProfile(*s.profile_entry, s);
  if (e.src->errors->size() != errors_before) return;
  if (s.storage.endpoint.empty()) s.storage.endpoint = "https://s3." + s.storage.region + ".amazonaws.com";
  d.spec.storage = std::move(s.storage);
}

void CheckS3NeedsStorage(const JobDraft& d, const SeenKeys& seen) {
  if (d.spec.storage) return;
  auto complain = [](const Entry& at, std::string_view what) {
    at.KeyError(std::string(what) + " is an s3:// destination: add a storage: block (endpoint, region, credentials)");
  };
  if (!seen.contains("artifacts") || !seen.at("artifacts").value.IsSequence()) return;
  const Entry& list = seen.at("artifacts");
  for (size_t i = 0; i < list.value.size(); ++i) {
    if (!list.value[i].IsMap()) continue;
    Entry item = list.Element(list.value[i], i);
    for (auto it = list.value[i].begin(); it != list.value[i].end(); ++it) {
      // A `to` that is no s3:// destination has its own error already.
      if (it->first.IsScalar() && it->first.Scalar() == "to" && it->second.IsScalar() &&
          CheckS3Destination(it->second.Scalar()).ok()) {
        complain(item.Child(it->first, it->second), "to");
      }
    }
  }
}

}  // namespace barge::runner::jobfile
