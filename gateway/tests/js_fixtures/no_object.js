var somethingElse = 1;
