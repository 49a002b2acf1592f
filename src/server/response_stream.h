#pragma once
// Writes the response of one generation request while its jobs run: server-sent events when
// streaming, else one JSON body at the end. While nothing new arrives it writes a keep-alive
// (an SSE comment, or JSON whitespace) every second, so a client that went away is noticed by a
// failed write and its jobs are cancelled.
#include <httplib.h>

#include <memory>
#include <vector>

#include "server/job.h"
#include "server/openai_format.h"
#include "server/request_parse.h"

namespace ts::server {

enum class Endpoint { Completions, Chat };

class ResponseStream {
 public:
  ResponseStream(Endpoint endpoint, ResponseHeader header, ParsedRequest request,
                 std::vector<std::shared_ptr<Job>> jobs, const Tokenizer& tok);

  // httplib's chunked content provider: writes what is ready; false when the client is gone.
  bool pump(httplib::DataSink& sink);
  void cancel();

 private:
  struct Choice {
    std::string text;
    std::vector<TokenLogprob> prompt_logprobs, logprobs;
    std::string finish_reason, error;
    size_t completion_tokens = 0;
    bool done = false;
  };
  bool pump_events(httplib::DataSink& sink);
  bool pump_body(httplib::DataSink& sink);
  static bool write(httplib::DataSink& sink, const std::string& data);
  bool write_event(httplib::DataSink& sink, const nlohmann::json& event);
  void absorb(Choice& c, Job::Update& u) const;
  nlohmann::json body() const;

  Endpoint endpoint_;
  ResponseHeader header_;
  ParsedRequest request_;
  std::vector<std::shared_ptr<Job>> jobs_;
  const Tokenizer& tok_;
  std::vector<Choice> choices_;
  size_t next_job_ = 0;     // the job the whole-body response waits on
  bool started_ = false;    // streaming: the opening event went out
  size_t text_offset_ = 0;  // streaming: logprobs' text_offset so far
};

}  // namespace ts::server
