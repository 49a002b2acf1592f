#include "server/response_stream.h"

#include "server/api_error.h"

namespace ts::server {
namespace {

using nlohmann::json;
constexpr std::chrono::milliseconds kKeepAlive{1000};

}  // namespace

ResponseStream::ResponseStream(Endpoint endpoint, ResponseHeader header, ParsedRequest request,
                               std::vector<std::shared_ptr<Job>> jobs, const Tokenizer& tok)
    : endpoint_(endpoint),
      header_(std::move(header)),
      request_(std::move(request)),
      jobs_(std::move(jobs)),
      tok_(tok),
      choices_(jobs_.size()) {}

void ResponseStream::cancel() {
  for (const auto& job : jobs_) job->cancel();
}

bool ResponseStream::pump(httplib::DataSink& sink) {
  return request_.stream ? pump_events(sink) : pump_body(sink);
}

bool ResponseStream::write(httplib::DataSink& sink, const std::string& data) {
  return sink.write(data.data(), data.size());  // never empty: an empty chunk ends the response
}

bool ResponseStream::write_event(httplib::DataSink& sink, const json& event) {
  return write(sink, "data: " + dump_json(event) + "\n\n");
}

void ResponseStream::absorb(Choice& c, Job::Update& u) const {
  if (!u.prompt_logprobs.empty()) c.prompt_logprobs = std::move(u.prompt_logprobs);
  for (const Job::Update::Piece& piece : u.pieces) {
    c.text += piece.text;
    if (piece.logprob) c.logprobs.push_back(*piece.logprob);
  }
  c.completion_tokens = u.completion_tokens;
  c.done = u.done;
  c.finish_reason = u.finish_reason;
  c.error = u.error;
}

bool ResponseStream::pump_events(httplib::DataSink& sink) {
  const GenerationParams& p = request_.params;
  const bool chat = endpoint_ == Endpoint::Chat;
  if (!started_) {
    started_ = true;
    if (chat) return write_event(sink, chat_chunk(header_, {{"role", "assistant"}, {"content", ""}}, ""));
    if (p.echo && p.logprobs < 0)
      return write_event(sink, completion_chunk(header_, request_.prompt_texts[0], nullptr, ""));
  }
  std::optional<Job::Update> u = jobs_[0]->take(kKeepAlive);
  if (!u) return write(sink, ": keep-alive\n\n");
  if (!u->prompt_logprobs.empty() &&
      !write_event(sink, completion_chunk(header_, request_.prompt_texts[0],
                                          completion_logprobs(u->prompt_logprobs, tok_, text_offset_), "")))
    return false;
  for (const Job::Update::Piece& piece : u->pieces) {
    if (piece.text.empty() && !piece.logprob) continue;
    json logprobs = nullptr;
    if (piece.logprob) logprobs = completion_logprobs({*piece.logprob}, tok_, text_offset_);
    const json event = chat ? chat_chunk(header_, {{"content", piece.text}}, "")
                            : completion_chunk(header_, piece.text, std::move(logprobs), "");
    if (!write_event(sink, event)) return false;
  }
  if (!u->done) return true;
  if (u->finish_reason == "error") {
    if (!write_event(sink, error_body(u->error, "server_error", 500))) return false;
  } else {
    const json event = chat ? chat_chunk(header_, json::object(), u->finish_reason)
                            : completion_chunk(header_, "", nullptr, u->finish_reason);
    if (!write_event(sink, event)) return false;
  }
  if (!write(sink, "data: [DONE]\n\n")) return false;
  sink.done();
  return true;
}

bool ResponseStream::pump_body(httplib::DataSink& sink) {
  // Returns to write a keep-alive byte every second even while tokens flow, since only a write
  // finds out that the client is gone.
  const auto deadline = std::chrono::steady_clock::now() + kKeepAlive;
  while (next_job_ < jobs_.size()) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    std::optional<Job::Update> u;
    if (left.count() <= 0 || !(u = jobs_[next_job_]->take(left))) return write(sink, " ");
    Choice& c = choices_[next_job_];
    absorb(c, *u);
    if (c.done) ++next_job_;
  }
  for (const Choice& c : choices_) {
    if (c.finish_reason != "error") continue;
    write(sink, dump_json(error_body(c.error, "server_error", 500)));
    sink.done();
    return true;
  }
  write(sink, dump_json(body()));
  sink.done();
  return true;
}

json ResponseStream::body() const {
  size_t prompt_tokens = 0, completion_tokens = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    prompt_tokens += request_.prompts[i].size();
    completion_tokens += choices_[i].completion_tokens;
  }
  if (endpoint_ == Endpoint::Chat)
    return chat_body(header_, choices_[0].text, choices_[0].finish_reason, prompt_tokens, completion_tokens);
  const GenerationParams& p = request_.params;
  json choices = json::array();
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    json logprobs = nullptr;
    if (p.logprobs >= 0) {
      std::vector<TokenLogprob> all = c.prompt_logprobs;
      all.insert(all.end(), c.logprobs.begin(), c.logprobs.end());
      size_t offset = 0;
      logprobs = completion_logprobs(all, tok_, offset);
    }
    choices.push_back(completion_choice(i, (p.echo ? request_.prompt_texts[i] : "") + c.text,
                                        std::move(logprobs), c.finish_reason));
  }
  return completion_body(header_, std::move(choices), prompt_tokens, completion_tokens);
}

}  // namespace ts::server
