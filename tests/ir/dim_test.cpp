#include <gtest/gtest.h>

#include "tensorjit/dim.h"
#include "tensorjit/error.h"

namespace tj {
namespace {

const Dim S = Dim::symbol("S");
const Dim T = Dim::symbol("T");

TEST(Dim, CanonicalFormMakesEqualExpressionsEqual) {
  EXPECT_EQ(S + 1, Dim(1) + S);
  EXPECT_EQ(S + S, 2 * S);
  EXPECT_EQ((S + 1) * (S - 1), S * S - 1);
  EXPECT_EQ(S * T, T * S);
  EXPECT_EQ(S - S, Dim(0));
  EXPECT_TRUE((S - S).is_const());
  EXPECT_NE(S, T);
  EXPECT_NE(S + 1, S);
}

TEST(Dim, Printing) {
  EXPECT_EQ(Dim(7).str(), "7");
  EXPECT_EQ(Dim(-3).str(), "-3");
  EXPECT_EQ(S.str(), "S");
  EXPECT_EQ((S + 1).str(), "S+1");
  EXPECT_EQ((2 * S).str(), "2*S");
  EXPECT_EQ((S - 1).str(), "S-1");
  EXPECT_EQ((Dim(1) - S).str(), "-S+1");
  EXPECT_EQ((T * S + 2 * S + 3).str(), "S*T+2*S+3");
  EXPECT_EQ((S * S).str(), "S*S");
}

TEST(Dim, ParseIsInverseOfPrint) {
  for (const Dim& d : {Dim(0), Dim(12), S, S + 1, 2 * S, S * T + 2 * S - 3, Dim(1) - S, S * S * T})
    EXPECT_EQ(Dim::parse(d.str()), d) << d.str();
  EXPECT_EQ(Dim::parse("(S+1)*(S-1)"), S * S - 1);
  EXPECT_EQ(Dim::parse(" 2 * S + 1 "), 2 * S + 1);
  EXPECT_EQ(Dim::parse("-(S-2)"), Dim(2) - S);
}

TEST(Dim, ParseErrorsGiveOffset) {
  size_t off = 99;
  EXPECT_THROW(Dim::parse("S+?", &off), Error);
  EXPECT_EQ(off, 2u);
  EXPECT_THROW(Dim::parse("", &off), Error);
  EXPECT_THROW(Dim::parse("(S+1", &off), Error);
  EXPECT_THROW(Dim::parse("S T", &off), Error);
  EXPECT_THROW(Dim::parse("99999999999999999999", &off), Error);
}

TEST(Dim, EvalAndSymbols) {
  SymEnv env{{"S", 5}, {"T", 3}};
  EXPECT_EQ((S * T + 2 * S - 3).eval(env), 22);
  EXPECT_THROW(Dim::symbol("U").eval(env), Error);
  EXPECT_EQ((S * T + S).symbols(), (std::vector<std::string>{"S", "T"}));
  EXPECT_EQ(Dim(4).value(), 4);
  EXPECT_THROW(S.value(), Error);
}

TEST(Dim, ExactDivision) {
  EXPECT_EQ((4 * S * T).div_exact(2 * T), 2 * S);
  EXPECT_EQ((6 * S + 4).div_exact(Dim(2)), 3 * S + 2);
  EXPECT_FALSE((6 * S + 3).div_exact(Dim(2)));
  EXPECT_FALSE((S + 1).div_exact(S));
  EXPECT_FALSE(S.div_exact(S + 1));  // not a monomial
  EXPECT_EQ(Dim(12).div_exact(Dim(4)), Dim(3));
  EXPECT_FALSE(Dim(12).div_exact(Dim(0)));
}

TEST(Dim, ShapeHelpers) {
  Shape s{2, S, 4};
  EXPECT_EQ(shape_str(s), "[2,S,4]");
  EXPECT_EQ(numel(s), 8 * S);
  EXPECT_FALSE(numel_const(s));
  EXPECT_EQ(*numel_const({2, 3}), 6);
  EXPECT_EQ(eval_shape(s, {{"S", 5}}), (std::vector<int64_t>{2, 5, 4}));
}

// Nesting is bounded and unary minuses are a loop: no text exhausts the stack.
TEST(Dim, DeepTextIsAnErrorOrALoopNeverAStackOverflow) {
  EXPECT_EQ(Dim::parse(std::string(200000, '-') + "1"), Dim(1));
  EXPECT_EQ(Dim::parse(std::string(199999, '-') + "S"), Dim(0) - S);
  EXPECT_EQ(Dim::parse(std::string(64, '(') + "S" + std::string(64, ')')), S);
  size_t at = 0;
  try {
    Dim::parse(std::string(5000, '(') + "1" + std::string(5000, ')'), &at);
    ADD_FAILURE() << "parsed";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("nested more than 64"), std::string::npos) << e.what();
    EXPECT_EQ(at, 64u);
  }
}

// Products of sums are bounded in terms and degree (time and memory).
TEST(Dim, ExpressionSizeIsBounded) {
  std::string sum = "(A+B+C+D+E+F+G+H+I+J+K+L+M+N+O+P)";
  EXPECT_THROW(Dim::parse(sum + "*" + sum + "*" + sum), Error);
  std::string power = "S";
  for (int i = 0; i < 70; ++i) power += "*S";
  EXPECT_THROW(Dim::parse(power), Error);
  EXPECT_NO_THROW(Dim::parse(sum + "*" + sum));
}

}  // namespace
}  // namespace tj
