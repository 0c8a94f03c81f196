// `notify:` — webhooks for the job's events (job_spec.h's NotifySpec).
#include "runner/jobfile/blocks.h"

#include <algorithm>

namespace barge::runner::jobfile {

namespace {

// A webhook's URL: http or https, no spaces or control characters.
Status CheckWebhookUrl(std::string_view url) {
  const bool scheme = url.starts_with("http://") || url.starts_with("https://");
  const bool clean = std::none_of(url.begin(), url.end(), [](char c) {
    return static_cast<unsigned char>(c) <= 0x20 || c == 0x7f;
  });
  if (scheme && clean && url.size() > url.find("//") + 2 && url.size() <= 2000) return Status::Ok();
  return Status::Error("expected an http:// or https:// URL, got " + QuoteValue(url));
}

struct NotifyDraft {
  NotifySpec notify;
  bool failed = false;
};

constexpr KeyRule<NotifyDraft> kNotifyRules[] = {
    {"url",
     {.type = KeyType::kString, .description = "The receiver's http:// or https:// URL (or url_from, where it holds a token)"},
     [](const Entry& e, NotifyDraft& d) {
       if (auto url = ReadChecked(e, CheckWebhookUrl)) d.notify.url = *url;
       else d.failed = true;
     }},
    {"url_from",
     {.type = KeyType::kBlock, .description = "Where the URL is read from, as a secret: {file: PATH} or {env: VARIABLE}", .keys = SecretValueKeys},
     [](const Entry& e, NotifyDraft& d) {
       std::optional<std::string> url = ReadSecretValue(e, "the URL");
       if (!url) {
         d.failed = true;
         return;
       }
       // Read with the secrets skipped (barge plan), it is empty.
       if (!url->empty()) {
         if (Status s = CheckWebhookUrl(*url); !s.ok()) {
           e.Error("the URL read from it is not an http:// or https:// URL");
           d.failed = true;
           return;
         }
       }
       d.notify.url = *url;
       d.notify.url_secret = true;
     }},
    {"events",
     {.type = KeyType::kEnumList, .description = "The events sent (default: started, succeeded, failed, cancelled, timed_out, restarted)", .choices = kNotifyEvents},
     [](const Entry& e, NotifyDraft& d) {
       if (!ExpectList(e, "events (" + JoinWords(kNotifyEvents, " or ") + ")")) {
         d.failed = true;
         return;
       }
       d.notify.events.clear();
       for (size_t i = 0; i < e.value.size(); ++i) {
         Entry item = e.Element(e.value[i], i);
         std::optional<std::string> name = ReadEnum(item, kNotifyEvents);
         if (!name) {
           d.failed = true;
           continue;
         }
         if (std::find(d.notify.events.begin(), d.notify.events.end(), *name) != d.notify.events.end()) {
           item.Error(QuoteValue(*name) + " is listed twice");
           continue;
         }
         d.notify.events.push_back(*name);
       }
     }},
    {"secret",
     {.type = KeyType::kBlock, .description = "Signs each body (X-Barge-Signature: sha256=HMAC-SHA256 in hex) with this key: {file: PATH} or {env: VARIABLE}", .keys = SecretValueKeys},
     [](const Entry& e, NotifyDraft& d) {
       std::optional<std::string> key = ReadSecretValue(e, "the signing key");
       if (!key) {
         d.failed = true;
         return;
       }
       if (e.src->read_secrets && key->empty()) {
         e.Error("the signing key is empty");
         d.failed = true;
         return;
       }
       d.notify.secret = *key;
     }},
};

}  // namespace

std::vector<KeyInfo> NotifyKeys() { return Describe(kNotifyRules); }

void ReadNotify(const Entry& e, JobDraft& d) {
  if (!ExpectList(e, "webhooks")) return;
  for (size_t i = 0; i < e.value.size(); ++i) {
    Entry item = e.Element(e.value[i], i);
    if (!e.value[i].IsMap()) {
      item.Error("expected a mapping with url (or url_from) and events, got " + TypeName(e.value[i]));
      continue;
    }
    NotifyDraft n;
    SeenKeys seen = ReadMapping(item, kNotifyRules, n);
    if (seen.contains("url") == seen.contains("url_from")) {
      e.src->Error(e.value[i].Mark(), item.path, "give one of url or url_from: where the webhook goes");
      continue;
    }
    if (!n.failed) d.spec.notify.push_back(n.notify);
  }
}

}  // namespace barge::runner::jobfile
