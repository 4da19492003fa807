// The `loopscale` program: a thin layer over the library, one file per subcommand.
#include <cstdio>
#include <exception>

#include "cli.hpp"
#include "loopscale/spec/spec.hpp"

int main(int argc, char** argv) {
  CLI::App app{"loopscale: looped transformers, mixture of experts and their scaling laws"};
  app.require_subcommand(1);
  for (auto& reg : loopscale::cli::registry()) reg(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    std::fputs(app.help().c_str(), stdout);
    return 0;
  } catch (const CLI::CallForAllHelp&) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const loopscale::cli::usage_error& e) {
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const loopscale::spec_error& e) {
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "loopscale: error: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "loopscale: failed: %s\n", e.what());
    return 1;
  }
  return 0;
}
