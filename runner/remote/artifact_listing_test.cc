// The artifact listing and file commands run by a real /bin/sh, GNU tar and
// coreutils against a stand-in `docker` whose `cp` prints a real tar
// archive of a directory the test made; and the reading of the listing.
#include "runner/remote/artifact_listing.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

namespace barge::runner {
namespace {

class Bed {
 public:
  Bed() {
    char tmpl[] = "/tmp/barge-listing-XXXXXX";
    dir_ = mkdtemp(tmpl);
    std::filesystem::create_directories(dir_ + "/bin");
    std::filesystem::create_directories(dir_ + "/src/ckpt/step 2");
    // `docker cp NAME:PATH -`: the archive of PATH's last element, as Docker makes it.
    std::ofstream(dir_ + "/bin/docker") << "#!/bin/sh\n"
                                        << "p=${2#*:}; tar -C \"" << dir_ << "/src$(dirname \"$p\")\" -cf - \"$(basename \"$p\")\"\n";
    chmod((dir_ + "/bin/docker").c_str(), 0755);
  }
  ~Bed() { std::filesystem::remove_all(dir_); }
  void Write(const std::string& rel, const std::string& bytes) { std::ofstream(dir_ + "/src/" + rel) << bytes; }
  std::string Run(const std::string& line) {
    std::ofstream(dir_ + "/script.sh") << line;
    return Capture("PATH=" + dir_ + "/bin:$PATH sh " + dir_ + "/script.sh");
  }
  static std::string Capture(const std::string& command) {
    std::string out;
    FILE* p = popen(command.c_str(), "r");
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    pclose(p);
    return out;
  }
  // MD5 of bytes [from, from+count) of a file, by md5sum (not split).
  std::string Md5Of(const std::string& rel, size_t from, size_t count) {
    return Capture("tail -c +" + std::to_string(from + 1) + " '" + dir_ + "/src/" + rel + "' | head -c " +
                   std::to_string(count) + " | md5sum")
        .substr(0, 32);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

TEST(ArtifactListing, ListsEachRegularFileWithItsSizeNameAndTheMd5OfEachPartAndNothingElse) {
  Bed bed;
  std::string big(250000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>((i * 7919) % 251);
  bed.Write("ckpt/step 2/model.bin", big);
  bed.Write("ckpt/odd\nname's.txt", "hello\n");
  bed.Write("ckpt/empty", "");
  std::filesystem::create_symlink("model.bin", bed.dir() + "/src/ckpt/step 2/link");
  const std::string out = bed.Run(ArtifactListingCommand(DockerCommands({"docker"}), "c1", "/ckpt", 100000));
  Result<std::vector<ListedFile>> files = ParseArtifactListing(out);
  ASSERT_TRUE(files.ok()) << files.status().message() << "\n" << out;
  ASSERT_EQ(files->size(), 3u) << out;  // the symlink and the directories are no files
  std::map<std::string, ListedFile> by_name;
  for (const ListedFile& f : *files) by_name[f.name] = f;
  const ListedFile& model = by_name["ckpt/step 2/model.bin"];
  EXPECT_EQ(model.size, 250000u);
  ASSERT_EQ(model.part_md5s.size(), 3u);
  EXPECT_EQ(model.part_md5s[0], bed.Md5Of("ckpt/step 2/model.bin", 0, 100000));
  EXPECT_EQ(model.part_md5s[1], bed.Md5Of("ckpt/step 2/model.bin", 100000, 100000));
  EXPECT_EQ(model.part_md5s[2], bed.Md5Of("ckpt/step 2/model.bin", 200000, 50000));
  const ListedFile& odd = by_name["ckpt/odd\nname's.txt"];
  EXPECT_EQ(odd.size, 6u);
  ASSERT_EQ(odd.part_md5s.size(), 1u);
  EXPECT_EQ(odd.part_md5s[0], "b1946ac92492d2347c6235b4d2611184");  // md5("hello\n")
  EXPECT_EQ(by_name["ckpt/empty"].size, 0u);
  EXPECT_TRUE(by_name["ckpt/empty"].part_md5s.empty());
}

TEST(ArtifactListing, TheFileCommandPrintsExactlyTheFilesBytes) {
  Bed bed;
  std::string bytes;
  for (int i = 0; i < 70000; ++i) bytes.push_back(static_cast<char>(i % 256));
  bed.Write("ckpt/step 2/model.bin", bytes);
  EXPECT_EQ(bed.Run(ArtifactFileCommand(DockerCommands({"docker"}), "c1", "/ckpt/step 2/model.bin")), bytes);
}

TEST(ArtifactListing, ALineThatIsNoListingIsAnErrorNamingIt) {
  Result<std::vector<ListedFile>> r = ParseArtifactListing("5 6162 b1946ac92492d2347c6235b4d2611184\nError: No such container: c1\n");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("line 2"), std::string::npos) << r.status().message();
  EXPECT_NE(r.status().message().find("No such container"), std::string::npos);
  EXPECT_FALSE(ParseArtifactListing("5 6x62 b1946ac92492d2347c6235b4d2611184\n").ok());
  EXPECT_FALSE(ParseArtifactListing("5 6162 nomd5\n").ok());
  Result<std::vector<ListedFile>> ok = ParseArtifactListing("0 6162\n");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ((*ok)[0].name, "ab");
}

}  // namespace
}  // namespace barge::runner
