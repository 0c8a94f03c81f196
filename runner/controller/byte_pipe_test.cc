#include "runner/controller/byte_pipe.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>

namespace barge::runner::internal {
namespace {

TEST(BytePipe, BytesPushedOnOneThreadArriveInOrderOnAnotherThenTheEnd) {
  BytePipe pipe(1 << 20);
  std::string sent;
  std::thread producer([&] {
    for (int i = 0; i < 2000; ++i) {
      const std::string chunk(1 + i % 97, static_cast<char>('a' + i % 26));
      sent += chunk;
      pipe.Push(chunk);
    }
    pipe.Close(Status::Ok());
  });
  std::string got, chunk;
  Status end = Status::Error("unset");
  while (pipe.Read(&chunk, &end)) got += chunk;
  producer.join();
  EXPECT_TRUE(end.ok()) << end.message();
  EXPECT_EQ(got, sent);
  EXPECT_TRUE(pipe.Consumed());
}

TEST(BytePipe, IsFullFromTheHighMarkUntilTheConsumerReads) {
  BytePipe pipe(100);
  pipe.Push(std::string(60, 'x'));
  EXPECT_FALSE(pipe.Full());
  pipe.Push(std::string(40, 'x'));
  EXPECT_TRUE(pipe.Full());
  std::string chunk;
  Status end;
  ASSERT_TRUE(pipe.Read(&chunk, &end));
  EXPECT_EQ(chunk.size(), 100u);
  EXPECT_FALSE(pipe.Full());
  EXPECT_FALSE(pipe.Consumed());
}

TEST(BytePipe, AStreamThatBrokeOffEndsWithItsErrorAfterTheBytesBefore) {
  BytePipe pipe(100);
  pipe.Push("abc");
  pipe.Close(Status::Error("connection lost"));
  pipe.Push("dropped");
  std::string chunk;
  Status end;
  ASSERT_TRUE(pipe.Read(&chunk, &end));
  EXPECT_EQ(chunk, "abc");
  EXPECT_FALSE(pipe.Read(&chunk, &end));
  EXPECT_EQ(end.message(), "connection lost");
}

TEST(BytePipe, AnAbandonedStreamDropsWhatComesAndSaysSoToTheProducer) {
  BytePipe pipe(10);
  pipe.Push(std::string(20, 'x'));
  pipe.Abandon();
  EXPECT_TRUE(pipe.Abandoned());
  EXPECT_TRUE(pipe.Consumed());
  EXPECT_FALSE(pipe.Full());
  pipe.Push("more");
  EXPECT_FALSE(pipe.Full());
}

TEST(BytePipe, AReadWaitingForBytesEndsWhenCancelled) {
  BytePipe pipe(10);
  std::atomic<bool> cancel{false};
  std::thread canceller([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(150));
    cancel = true;
  });
  std::string chunk;
  Status end;
  EXPECT_FALSE(pipe.Read(&chunk, &end, &cancel));
  canceller.join();
  EXPECT_FALSE(end.ok());
}

}  // namespace
}  // namespace barge::runner::internal
