// The flashtrain executable: everything is in train/cli/cli.cpp, so tests can run it in-process.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "train/cli/cli.h"

int main(int argc, char** argv) {
  try {
    return ft::cli_main(std::vector<std::string>(argv + 1, argv + argc), std::cin, std::cout, std::cerr);
  } catch (const std::exception& e) {  // cli_main reports its own errors; this is the last resort
    std::cerr << "flashtrain: error: " << e.what() << "\n";
    return 1;
  }
}
