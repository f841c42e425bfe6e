// Placeholder translation unit until nn/ modules land (issue 5); keeps ft_nn a real library.
namespace ft::nn {}
