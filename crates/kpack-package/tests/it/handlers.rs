//! Database handlers on real file names (Debian ROCm 7.2.4 packages, TheRock layouts), both
//! the files each handler claims and the ones it must leave generic.

use kpack_package::handlers::{Handler, classify, family_covers};

fn arch(h: Handler, rel: &str) -> Option<(String, String)> {
    h.classify(rel).map(|a| (a.artifact, a.target))
}

fn claims(h: Handler, rel: &str, artifact: &str, target: &str) {
    assert_eq!(
        arch(h, rel),
        Some((artifact.to_owned(), target.to_owned())),
        "{} on {rel}",
        h.name()
    );
}

fn leaves(h: Handler, rel: &str) {
    assert_eq!(arch(h, rel), None, "{} must leave {rel} generic", h.name());
}

#[test]
fn rocblas_claims_tensile_files_by_their_trailing_target() {
    let h = Handler::Rocblas;
    let lib = "lib/rocblas/library";
    claims(
        h,
        &format!(
            "{lib}/TensileLibrary_Type_4xi8I_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_CU104_gfx90a.co"
        ),
        "gfx90a",
        "gfx90a",
    );
    claims(
        h,
        &format!(
            "{lib}/TensileLibrary_Type_4xi8I_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_CU104_gfx90a.dat"
        ),
        "gfx90a",
        "gfx90a",
    );
    claims(
        h,
        &format!(
            "{lib}/TensileLibrary_Type_4xi8I_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_CU104_gfx90a-xnack+.hsaco"
        ),
        "gfx90a",
        "gfx90a:xnack+",
    );
    claims(
        h,
        &format!("{lib}/Kernels.so-000-gfx90a-xnack-.hsaco"),
        "gfx90a",
        "gfx90a:xnack-",
    );
    claims(
        h,
        &format!("{lib}/Kernels.so-000-gfx1151.hsaco"),
        "gfx1151",
        "gfx1151",
    );
    claims(
        h,
        &format!(
            "{lib}/TensileLibrary_Type_4xi8I_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_fallback_gfx1010.hsaco"
        ),
        "gfx1010",
        "gfx1010",
    );
    // Debian's versioned directory, and TheRock's per-arch directories.
    claims(
        h,
        "lib/x86_64-linux-gnu/rocblas/5/library/Kernels.so-000-gfx942.hsaco",
        "gfx942",
        "gfx942",
    );
    claims(
        h,
        "lib/rocblas/library/gfx942/TensileLibrary_lazy_gfx942.dat",
        "gfx942",
        "gfx942",
    );
    claims(
        h,
        "lib/rocblas/library/gfx950/anything.bin",
        "gfx950",
        "gfx950",
    );
    claims(
        h,
        &format!("{lib}/Kernels.so-000-gfx9-4-generic-xnack+.hsaco"),
        "gfx9-4-generic",
        "gfx9-4-generic:xnack+",
    );
}

#[test]
fn tensile_handlers_find_their_library_below_a_prefix_of_the_same_name() {
    // `kpack verify` classifies `<prefix>/<relpath>`; a Debian package laid out under the
    // prefix `<source package>/stage` names the library directory twice.
    claims(
        Handler::Hipsparselt,
        "hipsparselt/stage/usr/lib/x86_64-linux-gnu/hipsparselt/library/Kernels.so-000-gfx942.hsaco",
        "gfx942",
        "gfx942",
    );
    claims(
        Handler::Rocblas,
        "rocblas/stage/usr/lib/x86_64-linux-gnu/rocblas/5/library/TensileLibrary_lazy_gfx1100.dat",
        "gfx1100",
        "gfx1100",
    );
    leaves(
        Handler::Hipblaslt,
        "hipblaslt/stage/usr/lib/x86_64-linux-gnu/hipblaslt/library/TensileLiteLibrary_lazy_Mapping.dat",
    );
    leaves(
        Handler::Rocblas,
        "rocblas/stage/usr/share/doc/rocblas/gfx942.dat",
    );
}

#[test]
fn rocblas_leaves_arch_less_and_foreign_files_generic() {
    let h = Handler::Rocblas;
    leaves(
        h,
        "lib/rocblas/library/TensileLibrary_Type_4xi8I_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_fallback.dat",
    );
    leaves(h, "lib/rocblas/library/TensileLibrary_lazy_Mapping.dat");
    leaves(h, "lib/rocblas/library/gfx90a_notes.txt"); // not a Tensile extension
    leaves(h, "lib/rocblas/library/Kernels_gfx90a_extra.co"); // no target at the end
    leaves(h, "lib/librocblas.so.5.2");
    leaves(h, "lib/hipblaslt/library/Kernels.so-000-gfx942.hsaco"); // another library's
    leaves(h, "lib/rocblas/library/Kernels.so-000-gfx110.hsaco.bak");
    leaves(h, "lib/rocblas/library/TensileLibrary_xgfx90a.co"); // not a whole token
    leaves(h, "lib/rocblas/library/library_gfx11xx.dat"); // a family is not a target here
}

#[test]
fn hipblaslt_and_hipsparselt_keep_their_multi_arch_and_mapping_files_generic() {
    for (h, name) in [
        (Handler::Hipblaslt, "hipblaslt"),
        (Handler::Hipsparselt, "hipsparselt"),
    ] {
        let lib = format!("lib/{name}/library");
        claims(
            h,
            &format!(
                "{lib}/TensileLibrary_B8B8_B8B8_HA_Bias_SAB_SCD_SAV_UA_Type_B8B8_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx1200.co"
            ),
            "gfx1200",
            "gfx1200",
        );
        claims(
            h,
            &format!(
                "{lib}/TensileLibrary_B8B8_SB8_A_Bias_SAV_SPA_Type_B8S_HPA_Contraction_l_Ailk_Bjlk_Cijk_Dijk_gfx950.dat"
            ),
            "gfx950",
            "gfx950",
        );
        claims(
            h,
            &format!("{lib}/Kernels.so-000-gfx90a.hsaco"),
            "gfx90a",
            "gfx90a",
        );
        claims(
            h,
            &format!("{lib}/gfx942/extop_gfx942.co"),
            "gfx942",
            "gfx942",
        );
        leaves(h, &format!("{lib}/TensileLiteLibrary_lazy_Mapping.dat"));
        leaves(h, &format!("{lib}/hipblasltExtOpLibrary.dat"));
        leaves(h, &format!("{lib}/hipblasltTransform.hsaco"));
        leaves(h, "lib/rocblas/library/Kernels.so-000-gfx90a.hsaco");
    }
}

#[test]
fn aotriton_claims_image_and_kernel_directories_including_families() {
    let h = Handler::Aotriton;
    claims(
        h,
        "lib/aotriton.images/amd-gfx942/flash/attn_fwd/FONLY__^bf16@16,128,False.aks2",
        "gfx942",
        "gfx942",
    );
    claims(
        h,
        "lib/aotriton.images/amd-gfx11xx/flash/attn_fwd/x.aks2",
        "gfx11xx",
        "gfx11xx",
    );
    claims(
        h,
        "lib/aotriton.images/amd-gfx110x/flash/bwd/x.aks2",
        "gfx110x",
        "gfx110x",
    );
    claims(
        h,
        "lib/aotriton.images/amd-gfx120x/flash/bwd/x.aks2",
        "gfx120x",
        "gfx120x",
    );
    claims(
        h,
        "lib/aotriton/kernels/gfx942/flash/attn_fwd.hsaco",
        "gfx942",
        "gfx942",
    );
    claims(h, "lib/aotriton/kernels/gfx90a.aks2", "gfx90a", "gfx90a");
    leaves(h, "lib/aotriton.images/README");
    leaves(h, "lib/aotriton.images/amd-gfx942"); // a file, not the directory
    leaves(h, "lib/aotriton/kernels/common/x.aks2");
    leaves(h, "lib/libaotriton_v2.so.0.9");
    assert!(family_covers("gfx11xx", "gfx1151") && family_covers("gfx110x", "gfx1100"));
    assert!(!family_covers("gfx110x", "gfx1151") && !family_covers("gfx11xx", "gfx942"));
}

#[test]
fn miopen_splits_arch_and_cu_count_and_claims_ck_libraries() {
    let h = Handler::Miopen;
    let db = "share/miopen/db";
    claims(h, &format!("{db}/gfx942130.db.txt"), "gfx942", "gfx942");
    claims(h, &format!("{db}/gfx90a68.HIP.fdb.txt"), "gfx90a", "gfx90a");
    claims(h, &format!("{db}/gfx942e4.HIP.fdb.txt"), "gfx942", "gfx942");
    claims(
        h,
        &format!("{db}/gfx803_36.HIP.fdb.txt"),
        "gfx803",
        "gfx803",
    );
    claims(
        h,
        &format!("{db}/gfx1030_36.HIP.fdb.txt"),
        "gfx1030",
        "gfx1030",
    );
    claims(
        h,
        &format!("{db}/gfx950_ConvHipIgemmGroupFwdXdlops_decoder.ktn.model"),
        "gfx950",
        "gfx950",
    );
    claims(h, &format!("{db}/gfx90a.tn.model"), "gfx90a", "gfx90a");
    claims(
        h,
        &format!("{db}/gfx908_metadata.tn.model"),
        "gfx908",
        "gfx908",
    );
    claims(h, &format!("{db}/gfx90a68.kdb"), "gfx90a", "gfx90a");
    claims(h, "lib/libMIOpenCKGroupConv_gfx942.so", "gfx942", "gfx942");
    claims(
        h,
        "lib/libMIOpenCKGroupConv_gfx90a.so.1.0",
        "gfx90a",
        "gfx90a",
    );
    leaves(h, &format!("{db}/README.md"));
    leaves(h, &format!("{db}/miopen.db.txt"));
    leaves(h, "share/miopen/gfx942130.db.txt"); // not in miopen/db
    leaves(h, "lib/libMIOpen.so.1");
    leaves(h, "lib/libMIOpenCK_common.so");
}

#[test]
fn composablekernel_reads_feature_suffixes() {
    let h = Handler::Composablekernel;
    claims(
        h,
        "lib/libdevice_conv_operations_gfx942.a",
        "gfx942",
        "gfx942",
    );
    claims(
        h,
        "lib/libdevice_conv_operations_gfx90a_xnackp.a",
        "gfx90a",
        "gfx90a:xnack+",
    );
    claims(
        h,
        "lib/libdevice_gemm_operations_gfx90a_xnackm.a",
        "gfx90a",
        "gfx90a:xnack-",
    );
    leaves(h, "lib/libdevice_conv_operations.a");
    leaves(h, "lib/libdevice_conv_operations_gfx942.so");
    leaves(h, "lib/libdevice_conv_operations_gfx942_fast.a");
    leaves(h, "lib/libutility_gfx942.a");
}

#[test]
fn hipkernelprovider_and_hotswap_cache_find_their_arch_directories() {
    let h = Handler::Hipkernelprovider;
    claims(
        h,
        "lib/engines/arch_content/gemm/gfx942/kernels.co",
        "gfx942",
        "gfx942",
    );
    claims(
        h,
        "lib/engines/arch_content/a/b/gfx1100/c/k.hsaco",
        "gfx1100",
        "gfx1100",
    );
    leaves(h, "lib/engines/arch_content/gemm/common/k.json");
    leaves(h, "lib/engines/arch_content/gemm/gfx942"); // a file named like an arch
    leaves(h, "lib/engines/other/gfx942/k.co");
    let h = Handler::HotswapCache;
    let sha = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08";
    let t = "share/rocjitsu/translations";
    claims(h, &format!("{t}/gfx942/v1/{sha}.obj"), "gfx942", "gfx942");
    claims(
        h,
        &format!("{t}/gfx90a-xnack+/v1/{sha}.man"),
        "gfx90a",
        "gfx90a:xnack+",
    );
    claims(
        h,
        &format!("{t}/amdgcn-amd-amdhsa--gfx1100/v1/{sha}.obj"),
        "gfx1100",
        "gfx1100",
    );
    leaves(h, &format!("{t}/spirv/v1/{sha}.obj"));
    leaves(h, &format!("{t}/gfx942/v2/{sha}.obj"));
    leaves(h, &format!("{t}/gfx942/v1/{sha}.txt"));
}

#[test]
fn the_first_selected_handler_wins_and_unselected_ones_claim_nothing() {
    let rel = "lib/rocblas/library/Kernels.so-000-gfx942.hsaco";
    assert_eq!(classify(&[], rel), None);
    assert_eq!(classify(&[Handler::Miopen], rel), None);
    assert_eq!(
        classify(&[Handler::Miopen, Handler::Rocblas], rel).map(|a| a.target),
        Some("gfx942".to_owned())
    );
    for h in Handler::ALL {
        assert_eq!(Handler::from_name(h.name()), Some(h));
    }
}
