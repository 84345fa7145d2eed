# Cross-check fixtures for paramsym.groups (finite groups, characters, subgroups).
#
# Run once with GAP 4 (Debian: apt-get install gap-core gap-libs), from the repository root:
#
#     gap -q scripts/gap/character_tables.g
#
# It writes tests/fixtures/gap/character_tables.json. For every group it records permutation
# generators (1-based image lists), the conjugacy classes (a representative as an image list, the
# class size and the element order) in the column order of the character table, the irreducible
# characters as exact cyclotomics (conductor N and coefficients of E(N)^0 .. E(N)^(N-1) from
# CoeffsCyc), the Frobenius-Schur indicators, and the numbers of subgroups and of conjugacy
# classes of subgroups. GAP's DihedralGroup(2n) is our D_n (order 2n).

OUTFILE := "tests/fixtures/gap/character_tables.json";

JList := function(l)
  return Concatenation("[", JoinStringsWithSeparator(List(l, String), ", "), "]");
end;

JStr := function(s)
  return Concatenation("\"", s, "\"");
end;

GroupEntry := function(name, G)
  local deg, gens, tbl, ccl, irr, N, chars, reps, ccs, fields;
  deg := LargestMovedPoint(G);
  if deg = 0 then deg := 1; fi;
  gens := List(GeneratorsOfGroup(G), g -> JList(ListPerm(g, deg)));
  tbl := CharacterTable(G);
  ccl := ConjugacyClasses(tbl);
  irr := List(Irr(tbl), ValuesOfClassFunction);
  N := Conductor(Flat(irr));
  chars := List(irr, row -> Concatenation("[", JoinStringsWithSeparator(
             List(row, x -> JList(CoeffsCyc(x, N))), ", "), "]"));
  reps := List(ccl, c -> JList(ListPerm(Representative(c), deg)));
  ccs := ConjugacyClassesSubgroups(G);
  fields := [
    Concatenation(JStr("name"), ": ", JStr(name)),
    Concatenation(JStr("order"), ": ", String(Size(G))),
    Concatenation(JStr("degree"), ": ", String(deg)),
    Concatenation(JStr("generators"), ": [", JoinStringsWithSeparator(gens, ", "), "]"),
    Concatenation(JStr("class_representatives"), ": [", JoinStringsWithSeparator(reps, ", "), "]"),
    Concatenation(JStr("class_sizes"), ": ", JList(SizesConjugacyClasses(tbl))),
    Concatenation(JStr("class_element_orders"), ": ", JList(OrdersClassRepresentatives(tbl))),
    Concatenation(JStr("conductor"), ": ", String(N)),
    Concatenation(JStr("irr_coeffs"), ": [", JoinStringsWithSeparator(chars, ",\n    "), "]"),
    Concatenation(JStr("fs_indicators"), ": ", JList(Indicator(tbl, 2))),
    Concatenation(JStr("num_subgroup_classes"), ": ", String(Length(ccs))),
    Concatenation(JStr("num_subgroups"), ": ", String(Sum(ccs, Size)))
  ];
  return Concatenation("  {", JoinStringsWithSeparator(fields, ",\n   "), "}");
end;

groups := [];
for n in [2 .. 8] do
  Add(groups, [Concatenation("C", String(n)), CyclicGroup(IsPermGroup, n)]);
od;
for n in [3 .. 8] do
  Add(groups, [Concatenation("D", String(n)), DihedralGroup(IsPermGroup, 2 * n)]);
od;
Append(groups, [
  ["S3", SymmetricGroup(3)],
  ["S4", SymmetricGroup(4)],
  ["S5", SymmetricGroup(5)],
  ["A4", AlternatingGroup(4)],
  ["A5", AlternatingGroup(5)],
  ["Q8", QuaternionGroup(IsPermGroup, 8)],
  ["V4", DirectProduct(CyclicGroup(IsPermGroup, 2), CyclicGroup(IsPermGroup, 2))],
  ["C2xC3", DirectProduct(CyclicGroup(IsPermGroup, 2), CyclicGroup(IsPermGroup, 3))],
  ["D4xC2", DirectProduct(DihedralGroup(IsPermGroup, 8), CyclicGroup(IsPermGroup, 2))],
  ["C4xC2", DirectProduct(CyclicGroup(IsPermGroup, 4), CyclicGroup(IsPermGroup, 2))],
  # no closed form in paramsym; they exercise complex irreducibles of degree > 1 (F21) and
  # quaternionic ones (Dic3, SL(2,3))
  ["F21", Group((1,2,3,4,5,6,7), (2,3,5)(4,7,6))],
  ["Dic3", Image(SmallerDegreePermutationRepresentation(Image(IsomorphismPermGroup(SmallGroup(12, 1)))))],
  ["SL(2,3)", Image(SmallerDegreePermutationRepresentation(Image(IsomorphismPermGroup(SmallGroup(24, 3)))))]
]);

entries := List(groups, p -> GroupEntry(p[1], p[2]));
out := OutputTextFile(OUTFILE, false);
SetPrintFormattingStatus(out, false);  # no line wrapping with backslashes
PrintTo(out, "{\"generated_by\": \"scripts/gap/character_tables.g\",\n \"gap_version\": \"",
        GAPInfo.Version, "\",\n \"groups\": [\n", JoinStringsWithSeparator(entries, ",\n"), "\n]}\n");
CloseStream(out);
QUIT;
