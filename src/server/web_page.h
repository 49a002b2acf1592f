#pragma once
// The page served at "/": plain HTML, CSS and JavaScript, no build step.
#include <string_view>

namespace ts::server {

std::string_view web_page_html();

}  // namespace ts::server
